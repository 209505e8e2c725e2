package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// An action answered after the operator moved to another page must not
// re-render that page: the cancel of a job is held on its way back until
// the operator is on the waiting list with the bulk cancel's confirmation
// open; the late answer leaves the list alone, and the bulk cancel goes
// through.
func TestBrowserLateActionAnswerKeepsTheNewPage(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("reserve", echoArgs{N: 2}, workflow.After("charge")).
		Add("ship", echoArgs{N: 3}, workflow.After("charge")))
	must(t, err)
	ship := res.Steps["ship"].JobID

	// The cancel is applied at once; its answer waits for release.
	var applied testsignal.Signal[struct{}]
	applied.Init(t, "the cancel applied")
	release := make(chan struct{})
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/"+ship+"/cancel") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		applied.Signal(struct{}{})
		<-release
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	released := false
	t.Cleanup(func() { // before srv.Close: a held answer goes out
		if !released {
			close(release)
		}
	})

	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/#/job/default/"+ship))
	recordStatuses(t, tb)
	// Count the job lists the page fetches (a render of the list page).
	must(t, tb.page.Eval(tb.ctx, `window.__lists = 0; { const f = window.fetch;
		window.fetch = function (u) { if (/^api\/jobs\?/.test(String(u)) && !/select=1/.test(String(u))) window.__lists++; return f.apply(this, arguments); }; } true`, nil))
	confirm(t, tb, `.action[data-action="cancel"]`, "not shipping")
	applied.WaitOrTimeout()
	jobstest.WaitState(t, f.ledger, "default", ship, jobs.Cancelled)
	// When the answer is shown in the old page's box, the page schedules
	// its re-render; a timer set after it, for longer, fires after it.
	must(t, tb.page.Eval(tb.ctx, `{ const old = document.querySelector('.action[data-action="cancel"]');
		const obs = new MutationObserver(() => { if (old.dataset.done === '1') { obs.disconnect(); setTimeout(() => { document.body.dataset.lateAnswer = 'past'; }, 1000); } });
		obs.observe(old, { attributes: true }); } true`, nil))

	navigate(t, tb, "#/jobs?state=waiting&queue=default")
	bulk := `#bulk .action[data-action="bulk-cancel"]`
	waitJS(t, tb, "the bulk cancel", `!!document.querySelector(`+jsString(bulk+` button.act`)+`)`)
	click(t, tb, bulk+` button.act`)
	waitJS(t, tb, "the bulk confirmation", `!!document.querySelector(`+jsString(bulk+` .confirm-box input.note`)+`)`)
	lists := evalJS[int](t, tb, `window.__lists`)

	released = true
	close(release)
	waitJS(t, tb, "the old page's re-render time", `document.body.dataset.lateAnswer === 'past'`)
	if n := evalJS[int](t, tb, `window.__lists`); n != lists {
		t.Fatalf("the late answer re-rendered the list page (%d list fetches, want %d)", n, lists)
	}
	must(t, tb.page.Type(tb.ctx, bulk+` .confirm-box input.note`, "order withdrawn"))
	click(t, tb, bulk+` .confirm-box button.confirm`)
	waitStatus(t, tb, "the bulk result", "Done: 1 of 1 jobs.")
	jobstest.WaitState(t, f.ledger, "default", res.Steps["reserve"].JobID, jobs.Cancelled)
}
