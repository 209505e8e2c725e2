package dashboard_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// The workflows page lists a workflow with its progress; its page draws
// the steps by depth with each one's state, token and output, linked to
// the job pages, and an arrow along each dependency.
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
	// an arrow per dependency, from the right of the dependency's box to
	// the left of its dependent's, green once the dependency succeeded
	waitJS(t, tb, "the edges", `document.querySelectorAll('#workflow-graph svg path.wf-edge').length === 4`)
	edges := evalJS[string](t, tb, `[...document.querySelectorAll('#workflow-graph path.wf-edge')].map((p) => {
		const g = document.getElementById('workflow-graph').getBoundingClientRect();
		const from = document.querySelector('.wf-step[data-step="' + p.dataset.from + '"]').getBoundingClientRect();
		const to = document.querySelector('.wf-step[data-step="' + p.dataset.to + '"]').getBoundingClientRect();
		const [x1, y1, x2, y2] = p.getAttribute('d').match(/-?[0-9.]+/g).filter((_, i) => i < 2 || i >= 6).map(Number);
		const near = (a, b) => Math.abs(a - b) < 2;
		const ok = near(x1, from.right - g.left) && near(x2, to.left - g.left) &&
			near(y1, from.top + from.height / 2 - g.top) && near(y2, to.top + to.height / 2 - g.top);
		return p.dataset.from + '>' + p.dataset.to + ':' + p.getAttribute('stroke') + ':' + (ok ? 'attached' : 'loose');
	}).sort().join(' ')`)
	want := "charge>invoice:#2e7d32:attached charge>reserve:#2e7d32:attached invoice>ship:#888:attached reserve>ship:#888:attached"
	if edges != want {
		t.Errorf("edges %q, want %q", edges, want)
	}
}

// Step names are any letters, so a step may be named like a member every
// JavaScript object inherits (constructor, __proto__, toString): its box,
// its depth and its arrows are drawn like any other step's.
func TestBrowserWorkflowStepNamedLikeObjectMembers(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, f.client, workflow.New("proto").
		Add("constructor", echoArgs{N: 1}).
		Add("__proto__", echoArgs{N: 2}, workflow.After("constructor")).
		Add("toString", echoArgs{N: 3}, workflow.After("__proto__")).
		Add("ship", echoArgs{N: 4}, workflow.After("toString", "constructor")))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/workflows/"+res.ID))
	waitJS(t, tb, "the workflow graph", `!!document.querySelector('#workflow-graph')`)
	steps := evalJS[string](t, tb, `[...document.querySelectorAll('#workflow-graph .wf-step')].map((b) =>
		b.dataset.step + '@' + b.parentElement.dataset.depth).join(' ')`)
	if want := "constructor@0 __proto__@1 toString@2 ship@3"; steps != want {
		t.Errorf("steps drawn %q, want %q", steps, want)
	}
	waitJS(t, tb, "the edges", `document.querySelectorAll('#workflow-graph svg path.wf-edge').length >= 3`)
	edges := evalJS[string](t, tb, `[...document.querySelectorAll('#workflow-graph path.wf-edge')].map((p) =>
		p.dataset.from + '>' + p.dataset.to).sort().join(' ')`)
	if want := "__proto__>toString constructor>__proto__ constructor>ship toString>ship"; edges != want {
		t.Errorf("edges %q, want %q", edges, want)
	}
}

// A waiting step's page offers Cancel, named as a waiting step, and the
// list of waiting jobs offers to cancel every matching one.
func TestBrowserCancelWaitingSteps(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("reserve", echoArgs{N: 2}, workflow.After("charge")).
		Add("ship", echoArgs{N: 3}, workflow.After("charge")))
	must(t, err)
	srv := f.serveOps()
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/#/job/default/"+res.Steps["ship"].JobID))
	recordStatuses(t, tb)
	if q := confirm(t, tb, `.action[data-action="cancel"]`, "not shipping"); !strings.HasPrefix(q, "Cancel this waiting step?") {
		t.Errorf("confirmation: %q", q)
	}
	jobstest.WaitState(t, f.ledger, "default", res.Steps["ship"].JobID, jobs.Cancelled)

	navigate(t, tb, "#/jobs?state=waiting&queue=default")
	confirm(t, tb, `#bulk .action[data-action="bulk-cancel"]`, "order withdrawn")
	jobstest.WaitState(t, f.ledger, "default", res.Steps["reserve"].JobID, jobs.Cancelled)
	waitStatus(t, tb, "the bulk result", "Done: 1 of 1 jobs.")
}

// The workflows page shows 50 workflows, newest first, of how many there
// are, and links to the older ones: every workflow is reached, none twice.
func TestBrowserWorkflowsArePaged(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	const total = 53
	ids := map[string]bool{}
	for i := range total {
		res, err := workflow.Enqueue(ctx, f.client, workflow.New("bulk").Add("only", echoArgs{N: i}))
		if err != nil {
			t.Fatal(err)
		}
		ids[res.ID] = true
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/workflows"))
	seen := map[string]bool{}
	read := func(page string, rows int, pager string, older bool) {
		t.Helper()
		waitJS(t, tb, page, `!!document.querySelector('#workflows-pager') && document.querySelectorAll('#workflows tr[data-workflow]').length === `+fmt.Sprint(rows))
		for _, id := range strings.Fields(evalJS[string](t, tb, `[...document.querySelectorAll('#workflows tr[data-workflow]')].map((r) => r.dataset.workflow).join(' ')`)) {
			if seen[id] || !ids[id] {
				t.Errorf("%s lists %s (seen before: %v)", page, id, seen[id])
			}
			seen[id] = true
		}
		if txt := evalJS[string](t, tb, `document.querySelector('#workflows-pager').textContent`); !strings.Contains(txt, pager) {
			t.Errorf("%s's pager: %q, want %q", page, txt, pager)
		}
		if got := evalJS[bool](t, tb, `!!document.querySelector('#workflows-pager a[rel=next]')`); got != older {
			t.Errorf("%s links to older workflows: %v, want %v", page, got, older)
		}
	}
	read("the first page", 50, "1–50 of 53", true)
	navigate(t, tb, evalJS[string](t, tb, `document.querySelector('#workflows-pager a[rel=next]').getAttribute('href')`))
	read("the second page", total-50, "51–53 of 53", false)
	if len(seen) != total {
		t.Errorf("the pages listed %d of %d workflows", len(seen), total)
	}
}
