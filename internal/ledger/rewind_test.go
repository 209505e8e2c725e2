package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// rewinds collects the rewinds a ledger reports.
type rewinds struct {
	mu  sync.Mutex
	got []ledger.Rewind
}

func (r *rewinds) add(rw ledger.Rewind) { r.mu.Lock(); r.got = append(r.got, rw); r.mu.Unlock() }

func (r *rewinds) all() []ledger.Rewind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ledger.Rewind(nil), r.got...)
}

func newJob(q, op string) *ledger.NewJob {
	return &ledger.NewJob{ID: uuid.NewString(), Kind: "note", Queue: q, OperationID: op, Payload: []byte(`{}`), MaxRetries: 1}
}

// A Redis restarted without persistence lost everything. The client that
// enqueued before detects it at its next enqueue, the pool at its next
// claim; both detections are one record. The client's record re-creates
// the lost jobs, once.
func TestRewindDetectedRecordedAndResubmitted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	var byClient, byPool rewinds
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "client-a", Recent: 100, OnRewind: byClient.add})
	pool := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "pool-b", OnRewind: byPool.add})

	var lost []*ledger.NewJob
	for i := range 3 {
		lost = append(lost, newJob(q, fmt.Sprintf("op-%d", i)))
	}
	lost = append(lost, newJob(q, "")) // no operation id: re-submission checks the job's record
	if _, err := client.Insert(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Claim(ctx, q, "pool-b", time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	if got := byClient.all(); len(got) != 0 {
		t.Fatalf("rewinds before any loss: %+v", got)
	}

	srv.Restart() // no persistence: every key is gone

	after := newJob(q, "after")
	if _, err := client.Insert(ctx, []*ledger.NewJob{after}); err != nil {
		t.Fatal(err)
	}
	got := byClient.all()
	if len(got) != 1 {
		t.Fatalf("the client reported %d rewinds, want 1: %+v", len(got), got)
	}
	rw := got[0]
	if rw.Queue != q || rw.Found != 0 || rw.Known < 1 || rw.LostEnqueues != int64(len(lost)) || rw.LostRecorded != int64(len(lost)) {
		t.Fatalf("the client's rewind: %+v; want found 0 and %d enqueues lost, all recorded", rw, len(lost))
	}
	// A later enqueue does not report it again.
	if _, err := client.Insert(ctx, []*ledger.NewJob{newJob(q, "")}); err != nil {
		t.Fatal(err)
	}
	if len(byClient.all()) != 1 {
		t.Fatalf("one loss reported %d times", len(byClient.all()))
	}
	// The pool finds it at its next claim; the record is the same.
	if _, err := pool.Claim(ctx, q, "pool-b", time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	if got := byPool.all(); len(got) != 1 || got[0].LostEnqueues < 1 {
		t.Fatalf("the pool's rewinds: %+v", got)
	}
	recs, err := client.Rewinds(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Detections != 2 || recs[0].DetectedBy != "client-a" || recs[0].LostEnqueues != int64(len(lost)) ||
		recs[0].Found != 0 || recs[0].ReplicationID == "" || recs[0].LastAt.IsZero() {
		t.Fatalf("recorded rewinds: %+v", recs)
	}
	st, _ := client.Stats(ctx, q)
	if st["rewinds"] != 1 {
		t.Fatalf("rewinds counted %d times in the stats", st["rewinds"])
	}
	evs, _ := client.Events(ctx, q, 10)
	if !hasEvent(evs, "rewind") {
		t.Fatalf("no rewind event: %+v", evs)
	}

	// Re-submission re-creates every lost job once, by its own id.
	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Queue != q || res[0].Restored != len(lost) || res[0].Checked != len(lost) {
		t.Fatalf("resubmitted %+v, want %d restored", res, len(lost))
	}
	for _, j := range lost {
		rec, err := client.Get(ctx, q, j.ID)
		if err != nil || rec.State != jobs.Pending {
			t.Fatalf("lost job %s after re-submission: %+v, %v", j.ID, rec, err)
		}
	}
	if again, err := client.Resubmit(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a second re-submission: %+v, %v", again, err)
	}
	recs, _ = client.Rewinds(ctx, q)
	if len(recs) != 1 || recs[0].Resubmitted != int64(len(lost)) {
		t.Fatalf("the record after re-submission: %+v", recs)
	}
	if st, _ := client.Stats(ctx, q); st["resubmitted"] != int64(len(lost)) {
		t.Fatalf("resubmitted counted %d", st["resubmitted"])
	}
	counts, _ := client.Counts(ctx, q)
	// Every lost job once, the two enqueued after the loss, minus the one
	// the pool claimed after it.
	if counts[jobs.Pending]+counts[jobs.Running] != int64(len(lost)+2) {
		t.Fatalf("counts %v, want %d jobs", counts, len(lost)+2)
	}
}

// A re-submission leaves alone a job the ledger kept, whatever it became,
// and a lost job whose operation id was enqueued again after the loss.
func TestResubmitKeepsWhatTheLedgerHas(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Recent: 100})
	other := ledger.New(rdb, ledger.Config{Namespace: ns})
	kept, reused, plain := newJob(q, "kept"), newJob(q, "reused"), newJob(q, "")
	if _, err := client.Insert(ctx, []*ledger.NewJob{kept, reused, plain}); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	// After the loss: "kept" comes back (as another enqueue of its own id
	// would bring it) and runs to success; "reused" is enqueued again
	// under a new job id.
	if _, err := other.Insert(ctx, []*ledger.NewJob{kept}); err != nil {
		t.Fatal(err)
	}
	c, err := other.Claim(ctx, q, "w", time.Minute, 1)
	if err != nil || len(c.Jobs) != 1 {
		t.Fatal(c, err)
	}
	if _, err := other.Complete(ctx, q, []ledger.Completion{{ID: kept.ID, Token: c.Jobs[0].Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	again := newJob(q, "reused")
	if _, err := other.Insert(ctx, []*ledger.NewJob{again}); err != nil {
		t.Fatal(err)
	}
	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Checked != 3 || res[0].Restored != 1 {
		t.Fatalf("resubmitted %+v, want 3 sent and only the plain job restored", res)
	}
	if rec, err := client.Get(ctx, q, kept.ID); err != nil || rec.State != jobs.Succeeded {
		t.Fatalf("the job the ledger kept: %+v, %v", rec, err)
	}
	if _, err := client.Get(ctx, q, reused.ID); err == nil {
		t.Fatal("the lost job whose operation was enqueued again was re-created")
	}
	if rec, err := client.FindByOperation(ctx, "reused"); err != nil || rec.ID != again.ID {
		t.Fatalf("operation reused: %+v, %v", rec, err)
	}
	if rec, err := client.Get(ctx, q, plain.ID); err != nil || rec.State != jobs.Pending {
		t.Fatalf("the plain lost job: %+v, %v", rec, err)
	}
}

// Without a loss, no amount of concurrent enqueues, claims and completions
// from several ledgers, sharing pipelines, looks like a rewind.
func TestNoRewindWithoutLoss(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	const q = "default"
	var seen rewinds
	var wg sync.WaitGroup
	for w := range 4 {
		l := ledger.New(rdb, ledger.Config{Namespace: ns, Name: fmt.Sprintf("w%d", w), Recent: 50, OnRewind: seen.add})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, fmt.Sprintf("w%d-g%d-%d", w, g, i))}); err != nil {
						t.Error(err)
						return
					}
					res, err := l.Claim(ctx, q, "w", time.Minute, 2)
					if err != nil {
						t.Error(err)
						return
					}
					for _, c := range res.Jobs {
						if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: c.ID, Token: c.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}}); err != nil {
							t.Error(err)
							return
						}
					}
				}
				if _, err := l.CheckRewinds(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if got := seen.all(); len(got) != 0 {
		t.Fatalf("rewinds without a loss: %+v", got)
	}
}

func hasEvent(evs []ledger.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// Two rewinds before a re-submission (a restart from the same older
// snapshot twice): the second loses jobs acknowledged after the first was
// detected, and one Resubmit brings back the lost jobs of both.
func TestResubmitAfterTwoRewinds(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	var seen rewinds
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Recent: 100, OnRewind: seen.add})
	insert := func() *ledger.NewJob {
		t.Helper()
		j := newJob(q, "")
		if _, err := client.Insert(ctx, []*ledger.NewJob{j}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	kept := insert()
	if err := rdb.Save(ctx).Err(); err != nil { // the snapshot both restarts load
		t.Fatal(err)
	}
	first := insert()
	srv.Restart()
	detected := insert() // finds the first rewind
	second := insert()
	srv.Restart()
	insert() // finds the second rewind: detected and second are gone too
	if n := len(seen.all()); n != 2 {
		t.Fatalf("%d rewinds detected, want 2: %+v", n, seen.all())
	}
	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Restored != 3 {
		t.Fatalf("resubmitted %+v, want the 3 jobs the two rewinds lost", res)
	}
	for _, j := range []*ledger.NewJob{kept, first, detected, second} {
		if rec, err := client.Get(ctx, q, j.ID); err != nil || rec.State != jobs.Pending {
			t.Errorf("job %s after the re-submission: %+v, %v", j.ID, rec, err)
		}
	}
}

// A ledger that first read a queue before it had any write (a pool's claim
// of an empty queue) saw no history: the queue's first write, by anyone,
// starts one, and that is no loss.
func TestFirstWriteAfterAnEmptyReadIsNoRewind(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	const q = "default"
	var byPool rewinds
	pool := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "pool", OnRewind: byPool.add})
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "client"})
	if _, err := pool.Claim(ctx, q, "pool", time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := client.Insert(ctx, []*ledger.NewJob{newJob(q, fmt.Sprintf("op-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := pool.Claim(ctx, q, "pool", time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(res.Jobs))
	}
	if got := byPool.all(); len(got) != 0 {
		t.Fatalf("rewinds reported for a queue's first writes: %+v", got)
	}
}
