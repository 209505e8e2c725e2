package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserLongValuesStayInThePage: values with no place to break a
// line (an operation id, and so a job id, of 190 bytes; an error text of
// 5000) wrap within the page wherever they are shown (lists, the job's
// page, the attention cards, search), so a job cannot push the page's
// columns and actions out of the window.
func TestBrowserLongValuesStayInThePage(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	op := strings.Repeat("o", 190)
	id := f.enqueue(echoArgs{N: 1}, jobs.OperationID(op))
	c := f.claimOne("default", id, "w", time.Minute)
	if _, err := f.ledger.Complete(t.Context(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Dead, Error: strings.Repeat("x", 5000), Reason: strings.Repeat("r", 300)}}}); err != nil {
		t.Fatal(err)
	}
	review := f.reviewJob("default", echoArgs{N: 2}, strings.Repeat("p", 190))
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/"))
	waitJS(t, tb, "the overview", `!!document.querySelector('#queues')`)

	const overflow = `document.documentElement.scrollWidth - document.documentElement.clientWidth`
	for _, pg := range []struct{ hash, ready string }{
		{"#/jobs?state=dead", `!!document.querySelector('#jobs a[data-job=` + jsString(id) + `]')`},
		{"#/job/default/" + id, `!!document.getElementById('job-error')`},
		{"#/attention", `!!document.querySelector('#review article.card[data-job=` + jsString(review) + `]')`},
		{"#/search/" + op, `!!document.querySelector('#results a[data-job=` + jsString(id) + `]')`},
	} {
		navigate(t, tb, pg.hash)
		waitJS(t, tb, pg.hash, pg.ready)
		if n := evalJS[int](t, tb, overflow); n > 0 {
			t.Errorf("%s is %dpx wider than the window", pg.hash, n)
		}
	}
}
