package dashboard_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWaitingStepIsCancellable: a workflow step waiting for its
// dependencies can be cancelled (jobs.Client.Cancel takes it), so its page
// offers Cancel, and the cancel records who, why and the state it left.
func TestWaitingStepIsCancellable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("ship", echoArgs{N: 2}, workflow.After("charge")))
	must(t, err)
	ship := res.Steps["ship"].JobID
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	var d struct {
		Job         struct{ State jobs.State } `json:"job"`
		Cancellable bool                       `json:"cancellable"`
	}
	getJSON(t, h, "/api/jobs/default/"+ship, &d)
	if d.Job.State != jobs.Waiting || !d.Cancellable {
		t.Fatalf("waiting step: %+v, want cancellable", d)
	}
	if res, body := act(t, h, "/api/jobs/default/"+ship+"/cancel", `{"note":"not shipping"}`); res.StatusCode != 200 {
		t.Fatalf("cancel of a waiting step: %d %s", res.StatusCode, body)
	}
	if e := lastEntry(t, f, "default", ship); f.state("default", ship) != jobs.Cancelled || e.Event != "cancel" ||
		e.From != string(jobs.Waiting) || e.Actor != "operator:"+user || e.Note != "not shipping" {
		t.Fatalf("after the cancel: %s, %+v", f.state("default", ship), e)
	}
}
