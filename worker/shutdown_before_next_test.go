package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestShutdownBeforeNextPutsTheJobBack: a middleware still waiting before
// next (a semaphore, a rate limit) when the pool shuts down, that returns
// its cancelled context's error, leaves a job whose handler never ran: it
// is put back, due, its attempt not consumed, not left uncertain for the
// resolver (review, for a kind without Reconcile).
func TestShutdownBeforeNextPutsTheJobBack(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	cfg.Maintenance.Disabled = true
	waiting := make(chan struct{}, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			waiting <- struct{}{}
			<-ctx.Done() // a slot that never frees
			return ctx.Err()
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(context.Context, *jobs.Job[wrappedArgs]) error {
		return errors.New("the handler must not run")
	})); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	r := e.enqueue(wrappedArgs{})
	select {
	case <-waiting:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the middleware did not run")
	}
	stop()
	rec, err := e.ledger.Get(context.Background(), "default", r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || rec.Attempts != 0 {
		t.Fatalf("job %s after %d attempts (%s), want pending with its attempt not consumed", rec.State, rec.Attempts, rec.Error)
	}
}
