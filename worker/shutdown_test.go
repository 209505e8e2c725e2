package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
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

// TestShutdownNamesHandlersThatIgnoreTheirContext: a handler that ignores
// its cancelled context past the shutdown timeout and the commit wait is
// left running when Run returns; Run's error log names its job, so an
// operator can tell which job comes back through lease expiry even if the
// process exits before the handler returns. When it does return, its
// dropped outcome is logged with the job id too.
func TestShutdownNamesHandlersThatIgnoreTheirContext(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	p := e.pool(cfg)
	started := make(chan struct{})
	release := make(chan struct{})
	returned := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		defer close(returned)
		close(started)
		<-release // ignores ctx
		return nil
	}))
	job := e.enqueue(plainArgs{})
	stop := e.start(p)
	<-started
	stop()
	var line string
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "handlers still running") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, job.JobID) {
		t.Fatalf("Run's log of the handler still running does not name job %s: %q", job.JobID, line)
	}
	close(release)
	<-returned
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.logs.String(), "outcome dropped after shutdown") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "outcome dropped after shutdown") && !strings.Contains(l, job.JobID) {
			t.Fatalf("the dropped outcome's log does not name job %s: %s", job.JobID, l)
		}
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
	// Bounded well below the shutdown timeout: the put-back must not wait for it.
	rec := jobstest.WaitStateWithin(t, e.ledger, "default", waiter.JobID, jobs.Pending, 5*time.Second)
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
