package workflow_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestListLeavesTheStepsOutputsUnread: List (the dashboard's workflows
// page, `fencedq workflow list`) shows each workflow's state and progress,
// not its steps' outputs (up to jobs.MaxOutput each, a thousand steps a
// workflow): listing workflows whose steps recorded large outputs does not
// carry them from Redis, while Get, which shows them, still does.
func TestListLeavesTheStepsOutputsUnread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const steps, size = 16, 60 << 10
	res := e.enqueueOutputs(steps, size, nil)
	e.awaitState(res.ID, workflow.Succeeded)
	var list []*workflow.Status
	var err error
	n := e.bytesRead(func() { list, err = workflow.List(ctx, e.client, 0, 10) })
	if err != nil || len(list) != 1 || list[0].State != workflow.Succeeded || list[0].Done != steps || len(list[0].Steps) != steps {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if n >= size {
		t.Fatalf("listing the workflow carried %d bytes from Redis; its steps' outputs are %d bytes", n, steps*size)
	}
	if list[0].Steps[0].State != jobs.Succeeded || list[0].Steps[0].Output != nil {
		t.Fatalf("listed step %+v: its state, no output", list[0].Steps[0])
	}
	st := e.status(res.ID)
	if len(st.Steps[0].Output) < size {
		t.Fatalf("Get shows step s0's output as %d bytes, want its %d", len(st.Steps[0].Output), size)
	}
}
