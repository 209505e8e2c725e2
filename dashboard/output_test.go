package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/workflow"
)

// The job view carries the output a success recorded, redacted as stored.
func TestJobViewShowsTheOutput(t *testing.T) {
	f := newFixture(t)
	id := f.enqueue(echoArgs{N: 1})
	c := f.claimOne("default", id, "w", time.Minute)
	raw, shown := []byte(`{"card":"4242","amount":2}`), []byte(`{"amount":2,"card":"[redacted]"}`)
	if _, err := f.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: raw, OutputDisplay: shown}}}); err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})
	var d struct {
		Job struct {
			Output map[string]any `json:"output"`
		} `json:"job"`
	}
	body := getJSON(t, h, "/api/jobs/default/"+id, &d)
	if d.Job.Output["amount"] != float64(2) || d.Job.Output["card"] != "[redacted]" || strings.Contains(string(body), "4242") {
		t.Fatalf("job view: %s", body)
	}
}

// The workflows API lists workflows with their progress and shows one
// with its steps.
func TestWorkflowsAPI(t *testing.T) {
	f := newFixture(t)
	res, err := workflow.Enqueue(context.Background(), f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("ship", echoArgs{N: 2, Secret: secret}, workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})
	var l struct {
		Workflows []workflow.Status `json:"workflows"`
	}
	getJSON(t, h, "/api/workflows", &l)
	if len(l.Workflows) != 1 || l.Workflows[0].ID != res.ID || l.Workflows[0].Total != 2 || l.Workflows[0].State != workflow.Running {
		t.Fatalf("list: %+v", l)
	}
	var st workflow.Status
	body := getJSON(t, h, "/api/workflows?id="+res.ID, &st)
	if len(st.Steps) != 2 || st.Steps[1].State != "waiting" || st.Steps[1].Deps[0] != "charge" || strings.Contains(string(body), secret) {
		t.Fatalf("workflow: %s", body)
	}
	if r, _ := call(t, h, httptest.NewRequest(http.MethodGet, "/api/workflows?id=nope", nil)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown workflow: %d", r.StatusCode)
	}
	// the waiting step is counted with the queue's jobs and listed by state
	var ov overviewJSON
	getJSON(t, h, "/api/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Counts["waiting"] != 1 || ov.Queues[0].Counts["pending"] != 1 {
		t.Fatalf("overview counts: %+v", ov.Queues)
	}
	var list listJSON
	getJSON(t, h, "/api/jobs?queue=default&state=waiting", &list)
	if list.Total != 1 || len(list.Jobs) != 1 || list.Jobs[0].ID != res.Steps["ship"].JobID {
		t.Fatalf("waiting jobs: %+v", list)
	}
}
