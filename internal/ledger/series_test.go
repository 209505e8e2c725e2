package ledger_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestSeriesRecordsOneBucketAMinute: a bucket holds the counters and state
// counts of its minute, a second snapshot in the same minute replaces it,
// and Series returns the buckets since a time, oldest first.
func TestSeriesRecordsOneBucketAMinute(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

	f.enqueue(jobs.Delay(time.Hour))
	must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, t0.Add(10*time.Second)))
	f.enqueue(jobs.Delay(time.Hour))
	must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, t0.Add(50*time.Second))) // same minute: replaces
	id := f.enqueue()
	f.claimOne(id)
	must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, t0.Add(70*time.Second)))

	got, err := f.l.Series(ctx, f.q, t0.Add(-time.Hour))
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("want 2 buckets, got %+v", got)
	}
	if !got[0].At.Equal(t0) || !got[1].At.Equal(t0.Add(time.Minute)) {
		t.Errorf("bucket minutes: %v, %v", got[0].At, got[1].At)
	}
	if got[0].Stats["enqueued"] != 2 || got[0].Counts[jobs.Pending] != 2 {
		t.Errorf("first bucket (the later snapshot of its minute): %+v", got[0])
	}
	if got[1].Stats["enqueued"] != 3 || got[1].Stats["attempted"] != 1 || got[1].Counts[jobs.Running] != 1 || got[1].Counts[jobs.Pending] != 2 {
		t.Errorf("second bucket: %+v", got[1])
	}
	// since is inclusive of its minute.
	later, err := f.l.Series(ctx, f.q, t0.Add(time.Minute+30*time.Second))
	must(t, err)
	if len(later) != 1 || !later[0].At.Equal(t0.Add(time.Minute)) {
		t.Errorf("since the second minute: %+v", later)
	}
	if _, err := f.l.Series(ctx, "bad queue!", t0); err == nil {
		t.Error("Series accepted an invalid queue name")
	}
}

// TestSeriesIsBounded: a queue keeps at most a day of buckets, whatever
// the order they were recorded in.
func TestSeriesIsBounded(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	// An old bucket first, then a day and a bit of minutes.
	must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, t0.Add(-48*time.Hour)))
	n := ledger.SeriesLength + 20
	for i := range n {
		must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, t0.Add(time.Duration(i)*time.Minute)))
	}
	got, err := f.l.Series(ctx, f.q, time.Time{})
	must(t, err)
	if len(got) != ledger.SeriesLength {
		t.Fatalf("kept %d buckets, want %d", len(got), ledger.SeriesLength)
	}
	if first, last := got[0].At, got[len(got)-1].At; !last.Equal(t0.Add(time.Duration(n-1)*time.Minute)) ||
		last.Sub(first) != time.Duration(ledger.SeriesLength-1)*time.Minute {
		t.Errorf("kept %v .. %v", first, last)
	}
	card, err := rdb.ZCard(ctx, f.l.Namespace()+":{"+f.q+"}:series").Result()
	must(t, err)
	if card != int64(ledger.SeriesLength) {
		t.Errorf("the key holds %d entries", card)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMinutesCountedByTheScripts: the scripts count every enqueue, claim
// and outcome into the minute they ran in (no leader involved), a batch's
// outcomes included, and each minute's counts expire after MinuteKeep.
func TestMinutesCountedByTheScripts(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	ctx := context.Background()
	a := f.enqueue(jobs.OperationID("op-a"))
	f.enqueue(jobs.OperationID("op-a")) // deduplicated
	b, c := f.enqueue(), f.enqueue()
	res, err := f.l.Claim(ctx, f.q, "w1", time.Minute, 10)
	must(t, err)
	if len(res.Jobs) != 3 {
		t.Fatalf("claimed %d jobs", len(res.Jobs))
	}
	tok := map[string]ledger.Claimed{}
	for _, j := range res.Jobs {
		tok[j.ID] = j
	}
	_, err = f.l.Complete(ctx, f.q, []ledger.Completion{
		{ID: a, Token: tok[a].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}},
		{ID: b, Token: tok[b].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}},
		{ID: c, Token: tok[c].Token, Outcome: ledger.Outcome{To: ledger.Uncertain, Reason: "timeout"}},
	})
	must(t, err)
	// A stale completion of a finished job is fenced.
	_, err = f.l.Complete(ctx, f.q, []ledger.Completion{{ID: a, Token: tok[a].Token - 1, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
	must(t, err)

	now, err := f.l.ServerTime(ctx)
	must(t, err)
	ms, err := f.l.Minutes(ctx, f.q, now.Add(-time.Hour), now)
	must(t, err)
	if len(ms) == 0 || len(ms) > 2 { // the calls may straddle a minute
		t.Fatalf("minutes: %+v", ms)
	}
	sum := map[string]int64{}
	for _, m := range ms {
		if m.At.Second() != 0 || m.At.After(now) {
			t.Errorf("minute at %v", m.At)
		}
		for k, v := range m.Counts {
			sum[k] += v
		}
		ttl, err := rdb.PTTL(ctx, f.l.Namespace()+":{"+f.q+"}:minute:"+strconv.FormatInt(m.At.UnixMilli(), 10)).Result()
		must(t, err)
		if ttl <= ledger.MinuteKeep-2*time.Minute || ttl > ledger.MinuteKeep {
			t.Errorf("minute %v expires in %v, want about %v", m.At, ttl, ledger.MinuteKeep)
		}
	}
	want := map[string]int64{"enqueued": 3, "deduplicated_enqueue": 1, "attempted": 3, "succeeded": 2, "uncertain": 1, "fenced_commit": 1}
	for k, v := range want {
		if sum[k] != v {
			t.Errorf("%s counted %d, want %d (all: %v)", k, sum[k], v, sum)
		}
	}
	// The stats hash and the minutes agree.
	for k := range want {
		if f.stat(k) != sum[k] {
			t.Errorf("stats %s = %d, minutes %d", k, f.stat(k), sum[k])
		}
	}
	if old, err := f.l.Minutes(ctx, f.q, now.Add(-3*time.Hour), now.Add(-2*time.Hour)); err != nil || len(old) != 0 {
		t.Errorf("an earlier window: %+v %v", old, err)
	}
}

// TestSeriesOfManyQueuesOnCluster: one RecordSeries call records the
// history of queues whose keys live on different masters of a Redis
// Cluster, each bucket holding its own queue's counts.
func TestSeriesOfManyQueuesOnCluster(t *testing.T) {
	rdb := redistest.StartCluster(t).Client()
	f := newFixture(t, rdb)
	ctx := context.Background()
	qs := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	masters := map[string]bool{}
	for i, q := range qs {
		for range i + 1 {
			if _, err := f.c.Enqueue(ctx, noteArgs{Text: q}, jobs.Queue(q)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := rdb.MasterForKey(ctx, f.l.Namespace()+":{"+q+"}:pending")
		must(t, err)
		masters[m.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the queues' keys are on %d master(s); the test needs several", len(masters))
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	must(t, f.l.RecordSeries(ctx, qs, nil, t0))
	for i, q := range qs {
		got, err := f.l.Series(ctx, q, t0.Add(-time.Hour))
		must(t, err)
		if len(got) != 1 || got[0].Counts[jobs.Pending] != int64(i+1) {
			t.Fatalf("%s: buckets %+v, want one with %d pending", q, got, i+1)
		}
	}
}

// TestHistoryOfReadsMinutesAfterALateSnapshot: a snapshot recorded for a
// past minute after the queue counted (its counters read now) proves no
// minute idle before its read, so HistoryOf returns what Minutes does; a
// snapshot whose read is older than the counting leaves those minutes to
// read as well.
func TestHistoryOfReadsMinutesAfterALateSnapshot(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	ctx := context.Background()
	now, err := f.l.ServerTime(ctx)
	must(t, err)
	f.enqueue()
	must(t, f.l.RecordSeries(ctx, []string{f.q}, nil, now.Add(-30*time.Minute)))
	bs, err := f.l.Series(ctx, f.q, now.Add(-time.Hour))
	must(t, err)
	if len(bs) != 1 || bs[0].Read.Before(now) || bs[0].Read.After(now.Add(time.Minute)) {
		t.Fatalf("bucket read at %v (now %v)", bs, now)
	}
	hs, err := f.l.HistoryOf(ctx, []string{f.q}, now.Add(-time.Hour), now)
	must(t, err)
	want, err := f.l.Minutes(ctx, f.q, now.Add(-time.Hour), now)
	must(t, err)
	if len(hs) != 1 || len(want) == 0 || !reflect.DeepEqual(hs[0].Minutes, want) {
		t.Fatalf("history %+v, minutes %+v", hs, want)
	}
}
