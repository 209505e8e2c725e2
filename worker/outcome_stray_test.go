package worker_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestOutcomeOfAnAttemptWhoseHandlerStillRuns: an outer middleware (a
// tracer) asking JobView.Outcome after an inner one returned while next,
// called from a goroutine, still ran the handler is told uncertain, as
// the pool records it, not the success the inner middleware returned.
func TestOutcomeOfAnAttemptWhoseHandlerStillRuns(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	outcomes := make(chan string, 1)
	started := make(chan struct{})
	cfg.Middleware = []worker.Middleware{
		func(next worker.Handler) worker.Handler {
			return func(ctx context.Context, job worker.JobView) error {
				err := next(ctx, job)
				outcomes <- job.Outcome(err)
				return err
			}
		},
		func(next worker.Handler) worker.Handler {
			return func(ctx context.Context, job worker.JobView) error {
				go func() { _ = next(ctx, job) }()
				<-started
				return nil // without waiting for next
			}
		},
	}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		close(started)
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(wrappedArgs{})
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Uncertain)
	if got := <-outcomes; got != worker.OutcomeUncertain {
		t.Fatalf("Outcome told the outer middleware %q, want %q (the pool recorded the job uncertain)", got, worker.OutcomeUncertain)
	}
}
