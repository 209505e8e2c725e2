package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// enqueueRefused enqueues through c every way a caller can (one job, a
// unique one, a batch, with and without operation ids); each must fail
// with ErrWriteRefused, not as an unknown outcome.
func enqueueRefused(t *testing.T, c *jobs.Client) {
	t.Helper()
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, jobs.ErrWriteRefused) || errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Fatalf("%s: %v, want ErrWriteRefused (nothing written), not an unknown outcome", what, err)
		}
	}
	_, err := c.Enqueue(ctx, countArgs{N: 1})
	check("enqueue", err)
	_, err = c.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("refused-op"))
	check("enqueue with an operation id", err)
	_, err = c.Enqueue(ctx, countArgs{N: 3}, jobs.Unique(jobs.UniqueOpts{ByArgs: true}))
	check("unique enqueue", err)
	_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: countArgs{N: 4}}, {Args: countArgs{N: 5}, Options: []jobs.Option{jobs.Queue("other")}}})
	check("enqueue many", err)
}

// A client still connected to a primary that a failover demoted (now a
// read-only replica of the promoted node) has every enqueue refused with
// ErrWriteRefused: nothing was written there nor on the new primary, and
// the same enqueues through the failover client create their jobs.
func TestEnqueueOnADemotedPrimaryIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions()}
	stale := jobs.NewClient(f.Primary.Client(), cfg) // by the primary's address
	before, err := stale.Enqueue(ctx, countArgs{N: 0})
	if err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.KillPrimary()
	f.Rejoin() // the old primary is back, a replica of the promoted node

	enqueueRefused(t, stale)
	live := jobs.NewClient(f.Client(), cfg)
	insp := live.Inspector()
	for _, q := range []string{jobs.DefaultQueue, "other"} {
		counts, err := insp.Counts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if q == jobs.DefaultQueue {
			want = 1 // the job enqueued before the failover
		}
		if counts[jobs.Pending] != want {
			t.Fatalf("queue %s holds %d pending jobs after refused enqueues, want %d", q, counts[jobs.Pending], want)
		}
	}
	if _, err := insp.Get(ctx, before.Queue, before.JobID); err != nil {
		t.Fatalf("the job enqueued before the failover: %v", err)
	}
	if r, err := live.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("refused-op")); err != nil || r.Deduplicated {
		t.Fatalf("the refused operation enqueued through the primary: %+v, %v", r, err)
	}
}

// A primary with fewer good replicas than its min-replicas-to-write
// refuses every enqueue alike: ErrWriteRefused, nothing written.
func TestEnqueueBelowMinReplicasIsRefused(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	enqueueRefused(t, c)
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
		t.Fatal(err)
	}
	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] != 0 {
		t.Fatalf("%d pending jobs after refused enqueues, want 0", counts[jobs.Pending])
	}
}

// A primary with fewer good replicas than its min-replicas-to-write
// refuses every operator action before it writes: each fails with
// ErrWriteRefused (nothing written), not as an error that leaves the
// operator guessing whether it applied, and the jobs and the queue are as
// they were.
func TestOperatorActionsBelowMinReplicasAreRefused(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, countArgs{N: 1}, jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	id := res.JobID
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	actions := map[string]func() error{
		"cancel":  func() error { _, err := c.Cancel(ctx, jobs.DefaultQueue, id, "alice", "x"); return err },
		"run now": func() error { _, err := c.RunNow(ctx, jobs.DefaultQueue, id, "alice", "x"); return err },
		"pause":   func() error { _, err := c.Pause(ctx, "other", "alice", "x"); return err },
		"resume":  func() error { _, err := c.Resume(ctx, jobs.DefaultQueue, "alice", "x"); return err },
	}
	for name, act := range actions {
		if err := act(); !errors.Is(err, jobs.ErrWriteRefused) {
			t.Errorf("%s below min-replicas-to-write: %v, want ErrWriteRefused", name, err)
		}
	}
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Inspector().Get(ctx, jobs.DefaultQueue, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || !rec.RunAt.After(time.Now().Add(30*time.Minute)) {
		t.Errorf("the refused actions changed the job: %s due %v", rec.State, rec.RunAt)
	}
	if p, err := c.Inspector().Paused(ctx, "other"); err != nil || p != nil {
		t.Errorf("queue other paused by a refused pause: %+v, %v", p, err)
	}
}
