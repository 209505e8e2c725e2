package worker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type headedArgs struct{}

func (headedArgs) Kind() string { return "headed" }

// headedWorker leaves its first attempt's outcome unknown, and records
// the headers its Reconcile sees.
type headedWorker struct {
	seen testsignal.Signal[map[string]string]
}

func (w *headedWorker) Work(_ context.Context, j *jobs.Job[headedArgs]) error {
	if j.Attempt == 1 {
		return jobs.Unknown(errors.New("the reply was lost"))
	}
	return nil
}

func (w *headedWorker) Reconcile(_ context.Context, j *jobs.Job[headedArgs]) (jobs.Verdict, error) {
	w.seen.Signal(j.Headers)
	return jobs.Applied, nil
}

// TestReconcileSeesTheJobsHeaders: a kind's Reconcile gets the job's
// headers (a tenant id, a trace context), as its Work does.
func TestReconcileSeesTheJobsHeaders(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	w := &headedWorker{}
	w.seen.Init(t, "the headers Reconcile sees")
	if err := worker.Register(p, jobs.Worker[headedArgs](w)); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(headedArgs{}, jobs.Header("tenant", "acme"))
	if got := w.seen.WaitOrTimeout(); got["tenant"] != "acme" {
		t.Fatalf("Reconcile saw headers %v, want the job's tenant=acme", got)
	}
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
}
