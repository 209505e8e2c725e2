package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowWhoseEarlyStepExpiredSucceeded: a step that succeeded and
// expired (its retention passed) before the workflow's last step finished
// still counts as succeeded: the workflow succeeded, not failed, in Get and
// in its finished count.
func TestWorkflowWhoseEarlyStepExpiredSucceeded(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	ctx := context.Background()
	w := workflow.New("slow").
		Add("first", step("first")).
		Add("late", step("late"), workflow.After("first"), workflow.Options(jobs.Delay(4*time.Second)))
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "first", jobs.Succeeded)
	e.wait(res, "late", jobs.Succeeded)
	if _, err := e.ledger.Get(ctx, res.Steps["first"].Queue, res.Steps["first"].JobID); err == nil {
		t.Fatal("first has not expired: the test needs it gone")
	}
	if st := e.status(res.ID); st.State != workflow.Succeeded {
		t.Errorf("workflow %s, want succeeded (steps %+v)", st.State, st.Steps)
	}
	wk := e.ns + ":{default}:wf:" + res.ID
	redistest.Await(t, e.rdb, wk, "the workflow settled", func() bool {
		return e.rdb.HGet(ctx, wk, "final").Val() != ""
	})
	if got := e.rdb.HGet(ctx, wk, "final").Val(); got != workflow.Succeeded {
		t.Errorf("counted as finished %s, want succeeded", got)
	}
}
