package dashboard_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/workflow"
)

// The workflows page lists a workflow with its progress; its page draws
// the steps by depth with each one's state, token and output, linked to
// the job pages.
func TestBrowserWorkflows(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("reserve", echoArgs{N: 2}, workflow.After("charge")).
		Add("invoice", echoArgs{N: 3}, workflow.After("charge")).
		Add("ship", echoArgs{N: 4}, workflow.After("reserve", "invoice")))
	if err != nil {
		t.Fatal(err)
	}
	charge := res.Steps["charge"].JobID
	c := f.claimOne("default", charge, "w", time.Minute)
	out := []byte(`{"receipt":"r-1"}`)
	if _, err := f.ledger.Complete(ctx, "default", []ledger.Completion{{ID: charge, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: out, OutputDisplay: out}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/workflows"))
	row := `#workflows tr[data-workflow=` + jsString(res.ID) + `]`
	waitJS(t, tb, "the workflows list", `!!document.querySelector(`+jsString(row)+`)`)
	if txt := evalJS[string](t, tb, `document.querySelector(`+jsString(row)+`).textContent`); !strings.Contains(txt, "1/4") ||
		!strings.Contains(txt, "running") || !strings.Contains(txt, "order") {
		t.Errorf("workflow row: %q", txt)
	}
	navigate(t, tb, "#/workflows/"+res.ID)
	waitJS(t, tb, "the workflow page", `!!document.querySelector('#workflow-graph .wf-step[data-step="ship"]')`)
	if n := evalJS[int](t, tb, `document.querySelectorAll('#workflow-graph .wf-col').length`); n != 3 {
		t.Errorf("%d columns, want 3 (charge; reserve, invoice; ship)", n)
	}
	if d := evalJS[string](t, tb, `document.querySelector('.wf-step[data-step="ship"]').parentElement.dataset.depth`); d != "2" {
		t.Errorf("ship at depth %s", d)
	}
	box := evalJS[string](t, tb, `document.querySelector('.wf-step[data-step="charge"]').textContent`)
	if !strings.Contains(box, "succeeded") || !strings.Contains(box, c.Token.String()) || !strings.Contains(box, `"receipt":"r-1"`) {
		t.Errorf("charge's box: %q", box)
	}
	if s := evalJS[string](t, tb, `document.querySelector('.wf-step[data-step="reserve"]').dataset.state`); s != "pending" {
		t.Errorf("reserve: %s", s)
	}
	if s := evalJS[string](t, tb, `document.querySelector('.wf-step[data-step="ship"]').dataset.state`); s != "waiting" {
		t.Errorf("ship: %s", s)
	}
	if !evalJS[bool](t, tb, `!!document.querySelector('.wf-step[data-step="ship"] a[data-job=`+jsString(res.Steps["ship"].JobID)+`]')`) {
		t.Error("ship's box does not link to its job")
	}
}
