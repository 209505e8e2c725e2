package workflow_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// A workflow is an enqueue of its client: its acknowledgement is checked
// for a rewind, and a workflow Redis lost (restarted from an older
// snapshot) is written again by Client.Resubmit, once; one Redis kept is
// left alone.
func TestWorkflowLostInARewindIsDetectedAndResubmitted(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns, Registerer: e.reg})
	kept, err := workflow.Enqueue(ctx, c, diamond())
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	lost, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("lost"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart() // back to the snapshot: the second workflow is gone
	if _, err := workflow.Enqueue(ctx, c, diamond()); err != nil {
		t.Fatal(err)
	}
	if v := counter(t, e.reg, "fencedq_ledger_rewinds_total", ""); v != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total = %v after a workflow enqueue met the rewind, want 1", v)
	}
	out, err := c.Resubmit(ctx)
	if err != nil || len(out) != 1 || out[0].Restored != 4 {
		t.Fatalf("resubmitted %+v, %v; want the lost workflow's 4 steps", out, err)
	}
	for _, id := range []string{kept.ID, lost.ID} {
		if st, err := workflow.Get(ctx, c, id); err != nil || len(st.Steps) != 4 {
			t.Fatalf("workflow %s after the re-submission: %+v, %v", id, st, err)
		}
	}
	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending] != 3 || counts[jobs.Waiting] != 9 {
		t.Fatalf("counts %v, %v: want three workflows of 4 steps, each once", counts, err)
	}
	if again, err := c.Resubmit(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a second re-submission: %+v, %v", again, err)
	}
}
