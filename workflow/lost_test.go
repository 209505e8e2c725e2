package workflow_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestGetShowsALostStep: a step whose job record was deleted while its
// workflow ran reads as "missing" until the maintenance leader's pass
// (SettleWorkflow, then the hand-over move) ends it lost; then Get shows
// it lost with reason "job record missing", counts it final, and its
// dependent cancelled by it; once the rest ends the workflow is failed.
func TestGetShowsALostStep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").
		Add("charge", step("charge")).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))).
		Add("audit", step("audit")))
	if err != nil {
		t.Fatal(err)
	}
	charge := res.Steps["charge"]
	if err := e.rdb.Del(ctx, e.ledger.JobKey(charge.Queue, charge.JobID)).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := workflow.Get(ctx, e.client, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Steps[0].State != "missing" || st.State != workflow.Running {
		t.Fatalf("before a pass: charge %s, workflow %s; want missing, running", st.Steps[0].State, st.State)
	}
	_, _, lost, err := e.ledger.SettleWorkflow(ctx, res.Home, res.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != (ledger.LostStep{Name: "charge", Queue: charge.Queue, ID: charge.JobID}) {
		t.Fatalf("lost steps %+v, want charge", lost)
	}
	if _, err := e.ledger.MoveHandovers(ctx, res.Home); err != nil {
		t.Fatal(err)
	}
	st, err = workflow.Get(ctx, e.client, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]workflow.Step{}
	for _, s := range st.Steps {
		byName[s.Name] = s
	}
	if s := byName["charge"]; s.State != workflow.StepLost || s.Reason != "job record missing" {
		t.Fatalf("charge: %s %q, want lost, job record missing", s.State, s.Reason)
	}
	if s := byName["ship"]; s.State != jobs.Cancelled || s.Reason != "dependency charge lost: job record missing" {
		t.Fatalf("ship: %s %q, want cancelled by the lost charge", s.State, s.Reason)
	}
	if s := byName["audit"]; s.State != jobs.Pending {
		t.Fatalf("audit: %s, want pending", s.State)
	}
	if st.Done != 2 || st.State != workflow.Running {
		t.Fatalf("workflow: %d/%d done, %s; want 2/3, running", st.Done, st.Total, st.State)
	}
	if _, err := e.client.Cancel(ctx, byName["audit"].Queue, byName["audit"].JobID, "ops", ""); err != nil {
		t.Fatal(err)
	}
	if st, err = workflow.Get(ctx, e.client, res.ID); err != nil || st.State != workflow.Failed {
		t.Fatalf("workflow after every other step ended: %v, %v; want failed", st, err)
	}
}
