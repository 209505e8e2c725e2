package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
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
