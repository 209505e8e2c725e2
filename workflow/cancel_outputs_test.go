package workflow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestCancelReadsTheStepsOutputsOnce: Cancel needs each step's state, not
// its output, to cancel it, and returns the workflow as it is afterwards
// (outputs included): it carries the steps' outputs (up to jobs.MaxOutput
// each) from Redis once, for what it returns, not a second time for the
// read that finds the steps to cancel.
func TestCancelReadsTheStepsOutputsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const steps, size = 8, 60 << 10
	// a step no pool serves keeps the workflow running
	res := e.enqueueOutputs(steps, size, func(w *workflow.Workflow) {
		w.Add("gate", Bulky{}, workflow.Options(jobs.Queue("unserved")))
	})
	for i := range steps {
		e.wait(res, fmt.Sprint("s", i), jobs.Succeeded)
	}
	var st *workflow.Status
	var err error
	n := e.bytesRead(func() { st, err = workflow.Cancel(ctx, e.client, res.ID, "alice", "not needed") })
	if err != nil || st.State != workflow.Cancelled {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	if len(st.Steps[0].Output) < size {
		t.Fatalf("Cancel returns step s0's output as %d bytes, want its %d", len(st.Steps[0].Output), size)
	}
	if n >= 2*steps*size {
		t.Fatalf("cancelling the workflow carried %d bytes from Redis; its steps' outputs are %d bytes, read once for the status returned", n, steps*size)
	}
}
