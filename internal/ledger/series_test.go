package ledger_test

import (
	"context"
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
	must(t, f.l.RecordSeries(ctx, f.q, t0.Add(10*time.Second)))
	f.enqueue(jobs.Delay(time.Hour))
	must(t, f.l.RecordSeries(ctx, f.q, t0.Add(50*time.Second))) // same minute: replaces
	id := f.enqueue()
	f.claimOne(id)
	must(t, f.l.RecordSeries(ctx, f.q, t0.Add(70*time.Second)))

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
	must(t, f.l.RecordSeries(ctx, f.q, t0.Add(-48*time.Hour)))
	n := ledger.SeriesLength + 20
	for i := range n {
		must(t, f.l.RecordSeries(ctx, f.q, t0.Add(time.Duration(i)*time.Minute)))
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
