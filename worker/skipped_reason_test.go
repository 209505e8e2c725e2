package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestSucceededWithoutTheHandlerSaysSoInTheLedger: an attempt a middleware
// ended with no error without calling next succeeds, the handler never
// run; the job's record and history say so (its reason), not only a log
// line that operators reading the job (inspect, the dashboard) never see:
// a bare "succeeded" would claim an effect that never happened.
func TestSucceededWithoutTheHandlerSaysSoInTheLedger(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, v worker.JobView) error {
			if v.Header("skip") != "" {
				return nil
			}
			return next(ctx, v)
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(context.Context, *jobs.Job[wrappedArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	defer stop()
	skipped := e.enqueue(wrappedArgs{}, jobs.Header("skip", "1"))
	ran := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", skipped.JobID, jobs.Succeeded)
	if !strings.Contains(rec.Reason, "handler not run") {
		t.Errorf("skipped job: reason %q, want it to say the handler did not run", rec.Reason)
	}
	h, err := e.ledger.History(t.Context(), "default", skipped.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if last := h[len(h)-1]; !strings.Contains(last.Reason, "handler not run") {
		t.Errorf("skipped job's history %+v: want its last entry to say the handler did not run", last)
	}
	if rec := jobstest.WaitState(t, e.ledger, "default", ran.JobID, jobs.Succeeded); rec.Reason != "" {
		t.Errorf("a job whose handler ran: reason %q, want none", rec.Reason)
	}
}
