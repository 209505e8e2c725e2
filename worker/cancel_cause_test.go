package worker_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type stopArgs struct{}

func (stopArgs) Kind() string { return "stop-on-cause" }

// TestPermanentCancelCauseEndsTheJobCancelled: a handler that, once an
// operator cancelled its running job, returns its context's cause marked
// permanent (jobs.Permanent(context.Cause(ctx))) only says that it
// stopped: the operator's intent wins and the job ends cancelled, as with
// jobs.Permanent(ctx.Err()), not dead.
func TestPermanentCancelCauseEndsTheJobCancelled(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true // nothing reconciles: the outcome stays as committed
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[stopArgs](func(ctx context.Context, j *jobs.Job[stopArgs]) error {
		<-ctx.Done()
		return jobs.Permanent(context.Cause(ctx))
	})); err != nil {
		t.Fatal(err)
	}
	hooks := worker.InitHooks(p, t)
	e.start(p)
	res := e.enqueue(stopArgs{})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Running)
	if _, err := e.client.Cancel(context.Background(), "default", res.JobID, "alice", "wrong account"); err != nil {
		t.Fatal(err)
	}
	waitReported(hooks, 1)
	rec, err := e.ledger.Get(context.Background(), "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Cancelled {
		t.Fatalf("job %s (reason %q, error %q), want cancelled: the operator's cancel must win", rec.State, rec.Reason, rec.Error)
	}
}
