package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowViewsWithAStepsMasterDown: with the master holding one step
// of a workflow (not its home) killed, the workflows list and the
// workflow's page answer 200 with it, that step unreachable, flagged
// partial and naming the step's queue, instead of a 503.
func TestWorkflowViewsWithAStepsMasterDown(t *testing.T) {
	d := startDegradedCluster(t)
	ctx := context.Background()
	far := ""
	for i := 0; far == ""; i++ {
		q := fmt.Sprintf("far%d", i)
		if d.master("x:{"+q+"}:pending") == d.victim.Addr {
			far = q
		}
	}
	res, err := workflow.Enqueue(ctx, d.client, workflow.New("split").
		Add("a", echoArgs{N: 1}, workflow.Options(jobs.Queue(d.plain))).
		Add("b", echoArgs{N: 2}, workflow.After("a"), workflow.Options(jobs.Queue(far))))
	must(t, err)
	h, err := dashboard.New(d.client.Inspector(), d.client, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	d.victim.Kill()
	type status struct {
		ID    string `json:"id"`
		Steps []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"steps"`
	}
	check := func(path string, partial bool, unreachable []string, st status) {
		t.Helper()
		named := false
		for _, n := range unreachable {
			if n != far && !d.lost[n] {
				t.Fatalf("%s: unreachable %v names %s, which answers", path, unreachable, n)
			}
			named = named || n == far
		}
		if !partial || !named {
			t.Fatalf("%s: partial %v %v, want partial naming %s", path, partial, unreachable, far)
		}
		if st.ID != res.ID || len(st.Steps) != 2 || st.Steps[0].State != "pending" || st.Steps[1].State != string(workflow.StepUnreachable) {
			t.Fatalf("%s: %+v, want workflow %s with step b unreachable", path, st, res.ID)
		}
	}
	var list struct {
		Partial     bool     `json:"partial"`
		Unreachable []string `json:"unreachable"`
		Workflows   []status `json:"workflows"`
	}
	getJSON(t, h, "/api/workflows", &list)
	if len(list.Workflows) != 1 {
		t.Fatalf("/api/workflows: %+v, want the workflow", list)
	}
	check("/api/workflows", list.Partial, list.Unreachable, list.Workflows[0])
	var one struct {
		status
		Partial     bool     `json:"partial"`
		Unreachable []string `json:"unreachable"`
	}
	path := "/api/workflows?id=" + url.QueryEscape(res.ID)
	getJSON(t, h, path, &one)
	check(path, one.Partial, one.Unreachable, one.status)
}
