package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestNextCancelsAContextDetachedFromItsAttempt: a middleware that hands
// next a context keeping the attempt's values but not its cancellation
// (context.WithoutCancel, with a deadline of its own no later than the
// handler's) does not keep the handler from being told: an operator's
// cancel of the running job ends the handler's context, with its cause.
func TestNextCancelsAContextDetachedFromItsAttempt(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.HandlerTimeout = time.Minute
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			detached, cancel := context.WithDeadline(context.WithoutCancel(ctx), job.Deadline())
			defer cancel()
			return next(detached, job)
		}
	}}
	p := e.pool(cfg)
	running := make(chan struct{}, 1)
	told := make(chan error, 1)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		running <- struct{}{}
		select {
		case <-ctx.Done():
			told <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(testsignal.Timeout()):
			told <- errors.New("the handler's context was not cancelled")
			return nil
		}
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(wrappedArgs{})
	select {
	case <-running:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not run")
	}
	if _, err := e.client.Cancel(context.Background(), "default", r.JobID, "test", "stop it"); err != nil {
		t.Fatal(err)
	}
	if cause := <-told; cause == nil || cause.Error() != "worker: job cancelled by an operator" {
		t.Fatalf("the handler's context ended with %v, want the operator's cancel", cause)
	}
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Cancelled)
}
