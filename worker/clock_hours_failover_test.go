package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// skewArgs is a job of the skewed-clocks failover test; one with Retry
// set asks to be retried in an hour on its first attempt.
type skewArgs struct {
	Retry bool `json:"retry,omitempty"`
}

func (skewArgs) Kind() string { return "skew" }

// A failover to a node whose clock is 3 hours ahead, then one to a node
// 3 hours behind: live attempts and lease holders after each failover
// outrank the zombies of the tenure before (storage refuses the zombies,
// never a live attempt), jobs keep being claimed and completed, and the
// namespace's time never goes back. The lead the first node brought
// stays through the second tenure: a delay set before it comes due early
// by it, while delays, retries and RunAt times set during it are relative
// to the namespace's time and wait their full length. Setting the last
// node's clock right then changes nothing: the step is absorbed.
func TestFailoverHoursAheadThenHoursBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	const lead = 3 * time.Hour
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(lead) // B
	c := f.Client()
	ns := redistest.Namespace(t)
	jc := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions()}
	e := newEnvOn(t, c, ns)
	client := jobs.NewClient(c, jc)
	t.Cleanup(func() { _ = client.Close() })
	insp := client.Inspector()
	l := ledger.New(c, ledger.Config{Namespace: ns, Sentinel: jc.Sentinel})
	m := lease.NewManager(c, lease.Config{Namespace: ns, Sentinel: jc.Sentinel})
	store, err := redisfence.New(redistest.Start(t, redistest.Options{}).Client(), redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(fc fence.Fence, op string) error {
		fc.OperationID = op
		return store.Apply(ctx, fc, redisfence.RPush(store.DataKey(fc.Resource, "log"), op))
	}

	var mu sync.Mutex
	var refused []error
	retryRan := make(chan struct{})
	cfg := e.config()
	cfg.Jobs = jc
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[skewArgs](func(ctx context.Context, j *jobs.Job[skewArgs]) error {
		if j.Args.Retry && j.Attempt == 1 {
			close(retryRan)
			return jobs.RetryAfter(errors.New("not yet"), time.Hour)
		}
		fc, _ := fence.FromContext(ctx)
		if err := apply(fc, fc.OperationID); err != nil && !errors.Is(err, fence.ErrAlreadyApplied) {
			mu.Lock()
			refused = append(refused, err)
			mu.Unlock()
			return err
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)

	enqueue := func(opts ...jobs.Option) *jobs.Result {
		t.Helper()
		return settle(t, "enqueue", func() (*jobs.Result, error) { return client.Enqueue(ctx, skewArgs{}, opts...) })
	}
	// work shows work goes on: jobs enqueued now are claimed and completed.
	work := func() {
		t.Helper()
		var rs []*jobs.Result
		for range 5 {
			rs = append(rs, enqueue())
		}
		for _, r := range rs {
			jobstest.WaitState(t, l, r.Queue, r.JobID, jobs.Succeeded)
		}
	}
	nsTime := func() time.Time {
		t.Helper()
		return settle(t, "server time", func() (time.Time, error) { return l.ServerTime(ctx) })
	}
	// waitsFull checks a job set to wait about an hour is still waiting
	// about an hour of the namespace's time.
	waitsFull := func(r *jobs.Result, what string) {
		t.Helper()
		rec, err := insp.Get(ctx, r.Queue, r.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if left := rec.RunAt.Sub(nsTime()); rec.State != jobs.Pending || left < 50*time.Minute {
			t.Fatalf("%s: %s, due in %v of the namespace's time: it comes early", what, rec.State, left)
		}
	}

	// zombies are a claimed attempt and a lease holder the coming failover
	// loses (replication cut), each having written once.
	type zombies struct {
		job   ledger.Claimed
		lease *lease.Lease
		time  time.Time // the namespace's time the replica holds
	}
	const resource = "account:skew"
	makeZombies := func(tag string) zombies {
		t.Helper()
		z := enqueue(jobs.Queue("z"))
		now := nsTime()
		f.Sync()
		f.CutReplication()
		cl, err := l.Claim(ctx, "z", "zombie-"+tag, time.Minute, 1)
		if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != z.JobID {
			t.Fatalf("the zombie's claim: %+v, %v", cl, err)
		}
		zl, err := m.Acquire(ctx, resource, "zombie-"+tag, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		zj := cl.Jobs[0]
		if err := apply(fence.Fence{Resource: jobs.LeaseResource(zj.ID, ""), Token: zj.Token, Owner: "zombie"}, tag+"/zombie-1"); err != nil {
			t.Fatal(err)
		}
		if err := apply(fence.Fence{Resource: resource, Token: zl.Token, Owner: zl.Owner}, tag+"/zombie-lease-1"); err != nil {
			t.Fatal(err)
		}
		return zombies{job: zj, lease: zl, time: now}
	}
	// outrank runs the zombies' job and resource live after the failover:
	// at once, each with a token above the zombie's, accepted by storage,
	// then the zombies' next writes are refused as stale.
	outrank := func(z zombies, tag string) {
		t.Helper()
		cl := settle(t, "claim", func() (*ledger.ClaimResult, error) { return l.Claim(ctx, "z", "live-"+tag, time.Minute, 1) })
		if len(cl.Jobs) != 1 || cl.Jobs[0].ID != z.job.ID {
			t.Fatalf("the live claim of the zombie's job on the promoted node: %+v", cl)
		}
		lj := cl.Jobs[0]
		if lj.Token <= z.job.Token {
			t.Fatalf("fencing inverted: the live attempt's token %d is not above the zombie's %d", lj.Token, z.job.Token)
		}
		if err := apply(fence.Fence{Resource: jobs.LeaseResource(lj.ID, ""), Token: lj.Token, Owner: "live"}, tag+"/live-1"); err != nil {
			t.Fatalf("storage refused the live attempt: %v", err)
		}
		out, err := l.Complete(ctx, "z", []ledger.Completion{{ID: lj.ID, Token: lj.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
		if err != nil || !out[0].Applied {
			t.Fatalf("the live attempt's commit: %+v, %v", out, err)
		}
		ll := settle(t, "acquire", func() (*lease.Lease, error) { return m.Acquire(ctx, resource, "live-"+tag, 2*time.Second) })
		if ll.Token <= z.lease.Token {
			t.Fatalf("fencing inverted: the live lease token %d is not above the zombie's %d", ll.Token, z.lease.Token)
		}
		if err := apply(fence.Fence{Resource: resource, Token: ll.Token, Owner: ll.Owner}, tag+"/live-lease-1"); err != nil {
			t.Fatalf("storage refused the live lease holder: %v", err)
		}
		if err := m.Release(ctx, ll); err != nil {
			t.Fatal(err)
		}
		if err := apply(fence.Fence{Resource: jobs.LeaseResource(z.job.ID, ""), Token: z.job.Token, Owner: "zombie"}, tag+"/zombie-2"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("the zombie attempt's write after the live one: %v, want fence.ErrStale", err)
		}
		if err := apply(fence.Fence{Resource: resource, Token: z.lease.Token, Owner: z.lease.Owner}, tag+"/zombie-lease-2"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("the zombie lease holder's write after the live one: %v, want fence.ErrStale", err)
		}
		out, err = l.Complete(ctx, "z", []ledger.Completion{{ID: z.job.ID, Token: z.job.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
		if err != nil || out[0].Applied {
			t.Fatalf("the ledger took the zombie's commit: %+v, %v", out, err)
		}
	}

	// On A (a true clock): work, and a job delayed by 30 minutes.
	work()
	early := enqueue(jobs.Delay(30 * time.Minute))
	zA := makeZombies("a")
	f.KillPrimary()

	// On B, 3 hours ahead: the time moves ahead by the lead, never back
	// from what the replica held (times read during the cut are lost
	// with the writes that raised them).
	after := nsTime()
	if after.Before(zA.time) {
		t.Fatalf("the namespace's time went back from %v to %v", zA.time, after)
	}
	if ahead := time.Until(after); ahead < lead-5*time.Minute {
		t.Fatalf("the namespace's time is %v ahead after a failover to a node %v ahead", ahead, lead)
	}
	outrank(zA, "a")
	work()
	// The delay set before the lead comes due early by it.
	jobstest.WaitState(t, l, early.Queue, early.JobID, jobs.Succeeded)
	// A delay, a RunAt and a retry set during the lead wait their length.
	delayed := enqueue(jobs.Delay(time.Hour))
	runAt := enqueue(jobs.RunAt(time.Now().Add(time.Hour)))
	retried := settle(t, "enqueue", func() (*jobs.Result, error) { return client.Enqueue(ctx, skewArgs{Retry: true}) })
	// Its first attempt ran and asked for an hour: it is pending again.
	await(t, retryRan, "the retried job's first attempt")
	jobstest.WaitState(t, l, retried.Queue, retried.JobID, jobs.Pending)
	f.FailBackReady()
	f.Replica.SetClockOffset(-lead) // C
	zB := makeZombies("b")
	f.KillPrimary()

	// On C, 3 hours behind: the time goes on from B's mark, the lead stays.
	after = nsTime()
	if after.Before(zB.time) {
		t.Fatalf("the namespace's time went back from %v to %v", zB.time, after)
	}
	if ahead := time.Until(after); ahead < lead-5*time.Minute {
		t.Fatalf("the namespace's time is %v ahead after the second failover: the lead did not stay", ahead)
	}
	outrank(zB, "b")
	work()
	waitsFull(delayed, "a job delayed by an hour during the lead")
	waitsFull(runAt, "a job to run in an hour, enqueued during the lead")
	waitsFull(retried, "a job retried in an hour during the lead")

	// C's clock is set right (stepped forward by 3 hours, still below the
	// namespace's time): the step is absorbed into C's offset, so the time
	// goes on from where it was, not 6 hours ahead, and nothing set during
	// the lead comes early by the step.
	last := nsTime()
	f.Replica.SetClockOffset(0)
	after = nsTime()
	if after.Before(last) {
		t.Fatalf("the namespace's time went back from %v to %v", last, after)
	}
	if ahead := time.Until(after); ahead > lead+5*time.Minute {
		t.Fatalf("the namespace's time is %v ahead after C's clock was set right: it jumped by the step", ahead)
	}
	work()
	waitsFull(delayed, "a job delayed by an hour during the lead, after C's clock was set right")
	waitsFull(runAt, "a job to run in an hour, after C's clock was set right")
	waitsFull(retried, "a job retried in an hour, after C's clock was set right")
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Fatalf("storage refused live attempts: %v", refused)
	}
}
