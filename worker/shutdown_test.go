package worker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestStoppingMidDrainStrandsNothing stops pools while they drain, many
// times: once a pool's Run returns, none of the jobs it claimed is left
// running (handlers that started finished; jobs claimed but not started went
// back to pending with their attempt not consumed), and every job still
// ends succeeded exactly once.
func TestStoppingMidDrainStrandsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n, stops, every = 2000, 8, 150
	ps := make([]jobs.Params, n)
	for i := range ps {
		ps[i] = jobs.Params{Args: plainArgs{N: i}}
	}
	if _, err := e.client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	for stop := range stops + 1 {
		cfg := e.config()
		cfg.Concurrency = 16
		p := e.pool(cfg)
		reached := make(chan struct{})
		var once atomic.Bool
		start := runs.Load()
		_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
			if runs.Add(1)-start >= every && once.CompareAndSwap(false, true) {
				close(reached)
			}
			return nil
		}))
		halt := e.start(p)
		if stop == stops { // the last pool drains the rest
			waitCount(t, e, jobs.Succeeded, n)
			halt()
			break
		}
		<-reached
		halt()
		counts, err := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
		if err != nil {
			t.Fatal(err)
		}
		if counts[jobs.Running] != 0 {
			t.Fatalf("stop %d: %d jobs left running by a stopped pool (counts %v)", stop, counts[jobs.Running], counts)
		}
	}
	counts, _ := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
	if counts[jobs.Succeeded] != n || runs.Load() != n {
		t.Fatalf("counts %v, handler runs %d: want %d succeeded, each run once", counts, runs.Load(), n)
	}
	st, _ := e.client.Inspector().Stats(ctx, jobs.DefaultQueue)
	if st["attempted"] != st["succeeded"]+st["deferred"] {
		t.Fatalf("stats %v: every attempt either succeeded or was put back unstarted", st)
	}
}

// waitCount waits until n jobs of the default queue are in state s.
func waitCount(t *testing.T, e *env, s jobs.State, n int64) {
	t.Helper()
	key := e.ns + ":{" + jobs.DefaultQueue + "}:" + string(s)
	redistest.Await(t, e.rdb, key, fmt.Sprintf("%d jobs %s", n, s), func() bool {
		c, err := e.client.Inspector().Counts(context.Background(), jobs.DefaultQueue)
		return err == nil && c[s] == n
	})
}

// TestShutdownRecordsAbandonedHandlersUncertain: a handler that ignores
// its cancelled context past the shutdown timeout and the commit wait is
// abandoned: its attempt is recorded uncertain under its own token before
// Run returns, counted, named in the log, and Run's error is a
// *ShutdownError naming the job (matching ErrUnsettled). The result the
// handler returns later is fenced: the uncertain record stands.
func TestShutdownRecordsAbandonedHandlersUncertain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	p := e.pool(cfg)
	started := make(chan struct{})
	release := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		close(started)
		<-release // ignores ctx
		return nil
	}))
	hooks := worker.InitHooks(p, t)
	job := e.enqueue(plainArgs{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	cancel()
	err := <-done
	var se *worker.ShutdownError
	if !errors.Is(err, worker.ErrUnsettled) || !errors.As(err, &se) {
		t.Fatalf("Run = %v, want a *ShutdownError matching ErrUnsettled", err)
	}
	if len(se.Jobs) != 1 || se.Jobs[0].ID != job.JobID || se.Jobs[0].Reason != worker.UnsettledAbandoned || se.Jobs[0].Token == 0 {
		t.Fatalf("ShutdownError jobs %+v, want job %s abandoned with its token", se.Jobs, job.JobID)
	}
	rec, _ := e.ledger.Get(context.Background(), "default", job.JobID)
	if rec.State != jobs.Uncertain || rec.Token != se.Jobs[0].Token {
		t.Fatalf("after Run returned the job is %s under token %v, want uncertain under %v", rec.State, rec.Token, se.Jobs[0].Token)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handlers_abandoned_total")); v != 1 {
		t.Fatalf("fencedq_handlers_abandoned_total = %v, want 1", v)
	}
	var line string
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "handlers still running") {
			line = l
		}
	}
	if !strings.Contains(line, job.JobID) {
		t.Fatalf("Run's log of the handler still running does not name job %s: %q", job.JobID, line)
	}
	// The late success is committed only if its token still runs the job:
	// it does not (the job is uncertain), so nothing changes.
	close(release)
	hooks.Committed.WaitFor("the late result's commit", func(cs []ledger.Committed) bool { return len(cs) == 1 && !cs[0].Applied })
	if rec, _ = e.ledger.Get(context.Background(), "default", job.JobID); rec.State != jobs.Uncertain {
		t.Fatalf("the abandoned handler's late result moved the job to %s", rec.State)
	}
}

// TestShutdownPutsBackAttemptsWaitingForTheirResource: a job claimed but
// still waiting for its resource's lease when the pool stops goes back to
// pending at once, its attempt not consumed, instead of waiting out the
// shutdown timeout; and it never starts its handler during shutdown,
// even when the resource frees meanwhile (it would be cut off at the
// shutdown timeout and end uncertain).
func TestShutdownPutsBackAttemptsWaitingForTheirResource(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 2
	cfg.LeaseWait = time.Minute
	cfg.ShutdownTimeout = time.Minute
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	started := make(chan string, 2)
	release := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[accountArgs](func(ctx context.Context, j *jobs.Job[accountArgs]) error {
		started <- j.ID
		<-release
		return nil
	}))
	holder := e.enqueue(accountArgs{Account: "1"})
	stop := e.start(p)
	if got := <-started; got != holder.JobID {
		t.Fatalf("started %s, want %s", got, holder.JobID)
	}
	waiter := e.enqueue(accountArgs{Account: "1"})
	hooks.Claimed.WaitFor("the waiting job's claim", func(ev worker.ClaimEvent) bool {
		return len(ev.Result.Jobs) == 1 && ev.Result.Jobs[0].ID == waiter.JobID
	})
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// Bounded by half the shutdown timeout: the put-back must not wait
	// for it, and a loaded machine may take seconds to do it.
	rec := jobstest.WaitStateWithin(t, e.ledger, "default", waiter.JobID, jobs.Pending, cfg.ShutdownTimeout/2)
	if rec.Attempts != 0 {
		t.Fatalf("the job put back has %d attempts, want 0 (not consumed)", rec.Attempts)
	}
	close(release)
	<-stopped
	select {
	case id := <-started:
		t.Fatalf("job %s started its handler after the pool stopped", id)
	default:
	}
	if rec, _ = e.ledger.Get(context.Background(), "default", waiter.JobID); rec.State != jobs.Pending {
		t.Fatalf("after shutdown the waiting job is %s (reason %q), want pending", rec.State, rec.Reason)
	}
	jobstest.WaitState(t, e.ledger, "default", holder.JobID, jobs.Succeeded)
}

// TestShutdownWithRedisFrozenIsBounded: with Redis frozen (SIGSTOP) when
// the pool stops, Run still returns within ShutdownTimeout plus a bounded
// grace (ShutdownGrace): its last calls to Redis (the pool's leave, the
// final commits, the leader's release) do not hold it, and the job whose
// commit could not be sent is named in its *ShutdownError.
func TestShutdownWithRedisFrozenIsBounded(t *testing.T) {
	testFrozenShutdown(t, false)
}

// TestShutdownWithRedisFrozenMidCallIsBounded: Redis frozen while the
// fetch loop waits for a reply (its idle look, every 10 ms here) holds the
// loop until the client's read timeout, yet Run still returns within
// ShutdownTimeout plus ShutdownGrace of its context's end: the bounds
// count from the end of ctx, and no claim is sent once ctx ended.
func TestShutdownWithRedisFrozenMidCallIsBounded(t *testing.T) {
	testFrozenShutdown(t, true)
}

// testFrozenShutdown runs a pool whose one handler ignores its context,
// freezes Redis, stops the pool and checks that Run returns in time,
// naming the abandoned job. midCall: the fetch loop polls every 10 ms, so
// a call of its is in flight when Redis freezes.
func testFrozenShutdown(t *testing.T, midCall bool) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.ShutdownTimeout = time.Second
	if midCall {
		cfg.FetchPollInterval = worker.MinPollInterval
	}
	p := e.pool(cfg)
	started := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		close(started)
		<-release // ignores ctx: abandoned, and its uncertain record cannot be sent
		return nil
	}))
	job := e.enqueue(plainArgs{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	srv.Pause()
	t.Cleanup(srv.Resume) // runs before release is closed
	if midCall {
		time.Sleep(100 * time.Millisecond) // the idle look is in flight
	}
	begin := time.Now()
	cancel()
	bound := cfg.ShutdownTimeout + worker.ShutdownGrace + time.Second // a second for scheduling
	select {
	case err := <-done:
		if !errors.Is(err, worker.ErrUnsettled) || !strings.Contains(err.Error(), job.JobID) {
			t.Fatalf("Run = %v, want a *ShutdownError naming job %s", err, job.JobID)
		}
		t.Logf("Run returned after %v with Redis frozen", time.Since(begin).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("Run did not return within %v of its context's end with Redis frozen", bound)
	}
}

// TestShutdownTimeoutOfTheLargestDuration: a ShutdownTimeout of the
// largest Duration (wait as long as the handlers take) lets the shutdown
// commit the outcome of a handler that finishes after ctx ended: Run
// returns nil, not a *ShutdownError claiming the commit failed.
func TestShutdownTimeoutOfTheLargestDuration(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = math.MaxInt64
	p := e.pool(cfg)
	started := make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	res := e.enqueue(plainArgs{N: 1})
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if strings.Contains(e.logs.String(), "did not answer the shutdown's last calls") {
		t.Error("the shutdown gave up on Redis at once")
	}
	r, err := e.client.Inspector().Get(context.Background(), res.Queue, res.JobID)
	if err != nil || r.State != jobs.Succeeded {
		t.Fatalf("job: %v, %v; want succeeded", r, err)
	}
}
