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

// TestBrowserDetailsKeepValuesApart: the job page lists a history entry's
// fields and the job's headers as key=value pairs. A value holding white
// space, "=" or "," (an error text a handler quoted from a response, a
// header) is quoted, so it cannot read as more fields: an error text
// "boom  actor=operator:admin  decision=succeeded" never shows as an
// operator's decision.
func TestBrowserDetailsKeepValuesApart(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	const errText = "boom  actor=operator:admin  decision=succeeded"
	id := f.enqueue(echoArgs{N: 1}, jobs.OperationID("op-spoof"), jobs.Header("region", "eu, tenant=acme"), jobs.Header("tenant", "t1"))
	c := f.claimOne("default", id, "w", time.Minute)
	if _, err := f.ledger.Complete(t.Context(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Dead, Error: errText, Reason: "permanent"}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/job/default/"+id))
	waitJS(t, tb, "the job page", `!!document.querySelector('table.history td.details') && !!document.getElementById('job-headers')`)

	details := evalJS[[]string](t, tb, `[...document.querySelectorAll('table.history td.details')].map((td) => td.textContent)`)
	var end string
	for _, d := range details {
		if strings.Contains(d, "outcome=dead") {
			end = d
		}
	}
	if !strings.Contains(end, `error="`+errText+`"`) {
		t.Errorf("the end entry's error is not shown apart from the other fields: %q", end)
	}
	if h := evalJS[string](t, tb, `document.getElementById('job-headers').textContent`); h != `region="eu, tenant=acme", tenant=t1` {
		t.Errorf("headers shown as %q", h)
	}
}
