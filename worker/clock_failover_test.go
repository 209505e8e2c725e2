package worker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// settle runs call until it succeeds or testsignal.Timeout passes: right
// after a promotion a failover client's pooled connections may still point
// at the killed primary, and go-redis redials through the Sentinel after
// such an error (on a loaded machine, after more than a few tries).
func settle[T any](t *testing.T, what string, call func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(testsignal.Timeout())
	for {
		v, err := call()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the failover: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond) // a redial's pace, not a wait for an outcome
	}
}

// Times the old primary wrote (due times, lease deadlines) are read after
// a failover on the namespace's time, which continues from where the old
// primary left it, not on the promoted node's clock, 10 minutes behind:
// jobs enqueued just before the failover run at once, a killed attempt's
// lease expires within its TTL, and a resource lease held before the
// failover can be taken once its TTL has passed, not 10 minutes later.
func TestFailoverToSlowClockContinuesTime(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute)
	c := f.Client()
	ns := redistest.Namespace(t)
	e := newEnvOn(t, c, ns)
	l := ledger.New(c, ledger.Config{Namespace: ns})
	m := lease.NewManager(c, lease.Config{Namespace: ns})
	const ttl = 2 * time.Second

	// A killed attempt: claimed, then never renewed nor completed.
	killed, err := e.client.Enqueue(ctx, storeArgs{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := l.Claim(ctx, jobs.DefaultQueue, "killed", ttl, 1)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != killed.JobID {
		t.Fatalf("claim the attempt to kill: %+v, %v", cl, err)
	}
	// Jobs due now, and a resource lease held.
	var ps []jobs.Params
	for range 5 {
		ps = append(ps, jobs.Params{Args: storeArgs{}})
	}
	res, err := e.client.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	resource := ns + "-resource"
	if _, err := m.Acquire(ctx, resource, "before", ttl); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.KillPrimary()
	failedOver := time.Now()

	// The killed attempt's lease ends within its TTL of namespace time.
	exp := settle(t, "expire", func() (*ledger.Expired, error) { return l.Expire(ctx, jobs.DefaultQueue, 0, 10) })
	if !slices.Contains(exp.Moved, killed.JobID) && (exp.NextIn < 0 || exp.NextIn > ttl) {
		t.Fatalf("the killed attempt's lease (TTL %v) ends in %v of the promoted node's time: time did not continue from the old primary's", ttl, exp.NextIn)
	}
	// The jobs enqueued before the failover run at once.
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.WorkFunc[storeArgs](func(context.Context, *jobs.Job[storeArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	for _, r := range res {
		jobstest.WaitState(t, l, r.Queue, r.JobID, jobs.Succeeded)
	}
	// The resource lease can be taken once its TTL has passed: the wait
	// is bounded by the TTL and the failover, not the clock's 10 minutes.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	bound := testsignal.Timeout()
	for {
		_, err := m.Acquire(ctx, resource, "after", ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("acquire after the failover: %v", err)
		}
		if time.Since(failedOver) > bound {
			t.Fatalf("the resource lease held before the failover (TTL %v) is still held %v after it: %v", ttl, bound, err)
		}
		<-tick.C
	}
}

// After a failover to a node whose clock is 10 minutes behind, failing
// back to a node with a true clock makes the namespace's time neither jump
// forward (not even by the first failover's outage, which the slow node's
// time did not count) nor stop: a running attempt's lease (60 s) written on the slow
// node is not expired at once, and a job delayed by 60 s there does not
// become due at once.
func TestFailbackToTrueClockKeepsTime(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute)
	c := f.Client()
	ns := redistest.Namespace(t)
	client := jobs.NewClient(c, jobs.Config{Namespace: ns})
	l := ledger.New(c, ledger.Config{Namespace: ns})
	const long = 60 * time.Second

	// Due an hour ago, so the slow node's claim finds it whatever its clock.
	live, err := client.Enqueue(ctx, storeArgs{}, jobs.RunAt(time.Now().Add(-time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.KillPrimary() // the slow node is primary

	cl := settle(t, "claim", func() (*ledger.ClaimResult, error) { return l.Claim(ctx, jobs.DefaultQueue, "live", long, 1) })
	if len(cl.Jobs) != 1 || cl.Jobs[0].ID != live.JobID {
		t.Fatalf("claim on the slow node: %+v", cl)
	}
	delayed := settle(t, "enqueue", func() (*jobs.Result, error) {
		return client.Enqueue(ctx, storeArgs{}, jobs.Delay(long), jobs.OperationID(ns+"-delayed"))
	})
	before, err := l.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	f.FailBackReady() // the old primary, true clock, replicates the slow node
	f.KillPrimary()
	after := settle(t, "server time", func() (time.Time, error) { return l.ServerTime(ctx) })
	// The true-clock node's time is ahead of the namespace's by the first
	// failover's outage, which the slow node's tenure did not count: the
	// namespace's time goes on from its mark instead of jumping by it.
	if gained, elapsed := after.Sub(before), time.Since(sent); gained > elapsed+200*time.Millisecond {
		t.Fatalf("the namespace's time gained %v over %v of failing back: it jumped forward", gained, elapsed)
	}

	exp := settle(t, "expire", func() (*ledger.Expired, error) { return l.Expire(ctx, jobs.DefaultQueue, 0, 10) })
	if slices.Contains(exp.Moved, live.JobID) {
		t.Fatalf("the running attempt's lease (%v, written on the slow node) expired at once on the true-clock node", long)
	}
	got, err := l.Claim(ctx, jobs.DefaultQueue, "after", time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range got.Jobs {
		if j.ID == delayed.JobID {
			t.Fatalf("the job delayed by %v on the slow node ran at once on the true-clock node", long)
		}
	}
	out, err := l.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{{ID: live.JobID, Token: cl.Jobs[0].Token,
		Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("the live attempt's commit after the failback: %+v, %v", out, err)
	}
}
