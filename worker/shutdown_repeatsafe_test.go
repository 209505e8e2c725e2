package worker_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// repeatSafe is a worker whose effects are safe to repeat
// (jobs.RetryOnTimeout).
type repeatSafe struct {
	work func(ctx context.Context, j *jobs.Job[plainArgs]) error
}

func (w repeatSafe) Work(ctx context.Context, j *jobs.Job[plainArgs]) error { return w.work(ctx, j) }

func (repeatSafe) RetryOnTimeout() bool { return true }

// TestShutdownRetriesARepeatSafeKind: a handler the shutdown cuts off (its
// context cancelled at the end of ShutdownTimeout, and it returns) of a
// kind whose effects are safe to repeat is retried, as after its own
// timeout, instead of being left uncertain: such a kind has nothing to
// reconcile, and without a Reconcile the job would wait in review for an
// operator after every deploy that stopped it mid-call. Its next attempt
// runs it to the end.
func TestShutdownRetriesARepeatSafeKind(t *testing.T) {
	for _, goexit := range []bool{false, true} {
		t.Run(map[bool]string{false: "returns", true: "goexit"}[goexit], func(t *testing.T) { shutdownRetriesARepeatSafeKind(t, goexit) })
	}
}

// shutdownRetriesARepeatSafeKind is TestShutdownRetriesARepeatSafeKind
// with a handler that returns once cancelled or, with goexit, ends its
// goroutine (runtime.Goexit, as t.FailNow does).
func shutdownRetriesARepeatSafeKind(t *testing.T, goexit bool) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	p := e.pool(cfg)
	started := make(chan struct{})
	_ = worker.Register(p, repeatSafe{work: func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		close(started)
		<-ctx.Done() // a long job, still running when the pool stops
		if goexit {
			runtime.Goexit()
		}
		return ctx.Err()
	}})
	job := e.enqueue(plainArgs{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil (the handler returned once cancelled)", err)
	}
	rec, err := e.ledger.Get(context.Background(), "default", job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || rec.Attempts != 1 {
		t.Fatalf("after the shutdown the job is %s after %d attempt(s) (reason %q), want pending after 1: a retry", rec.State, rec.Attempts, rec.Reason)
	}

	next := e.pool(cfg)
	_ = worker.Register(next, repeatSafe{work: func(context.Context, *jobs.Job[plainArgs]) error { return nil }})
	e.start(next)
	if rec = jobstest.WaitState(t, e.ledger, "default", job.JobID, jobs.Succeeded); rec.Attempts != 2 {
		t.Fatalf("the job succeeded after %d attempts, want 2", rec.Attempts)
	}
}
