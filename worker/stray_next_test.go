package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestMiddlewareReturningWhileNextRunsIsUncertain: a middleware that runs
// next in a goroutine and returns before it does no longer commits the
// attempt as succeeded while the handler still runs: the attempt is
// uncertain with ErrHandlerStillRunning (logged with the job id, counted
// as an abandoned handler), the handler's context is cancelled, and what
// the handler returns later is logged, not committed.
func TestMiddlewareReturningWhileNextRunsIsUncertain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true // the uncertain job stays uncertain
	started := make(chan struct{}, 1)
	late := make(chan error, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			go func() { late <- next(ctx, job) }()
			<-started
			return nil // without waiting for next
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		started <- struct{}{}
		<-ctx.Done() // cancelled once the attempt ended
		return errors.New("late failure")
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Uncertain)
	if rec.Attempts != 1 || !strings.Contains(rec.Error, worker.ErrHandlerStillRunning.Error()) {
		t.Fatalf("record %+v: want one uncertain attempt with ErrHandlerStillRunning", rec)
	}
	if err := <-late; err == nil || err.Error() != "late failure" {
		t.Fatalf("next returned %v to the middleware's goroutine, want the handler's error", err)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handlers_abandoned_total")); v != 1 {
		t.Fatalf("abandoned handlers metric %v, want 1", v)
	}
	var uncertain, lateLogged bool
	for line := range strings.Lines(e.logs.String()) {
		if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, r.JobID) {
			continue
		}
		uncertain = uncertain || strings.Contains(line, "still running the handler")
		lateLogged = lateLogged || (strings.Contains(line, "ended after its attempt") && strings.Contains(line, "late failure"))
	}
	if !uncertain || !lateLogged {
		t.Fatalf("logs name job %s: uncertain %v, late result %v:\n%s", r.JobID, uncertain, lateLogged, e.logs.String())
	}
}
