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
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserShowsBidiAndControlCharacters: an operation id holding a
// right-to-left override and a zero-width space (the client takes them:
// they are no control characters) and an error text holding one, a C1
// control, a line separator and a tag character are shown with those
// characters as \u escapes (\U above U+FFFF), on the job's page and in
// the list, so they cannot make the value, or the text beside it, read
// otherwise, nor pass for another.
func TestBrowserShowsBidiAndControlCharacters(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	const op = "refund-\u202egnp\u200b.exe"
	const errText = "declined\u009b2J \u2067spoof\u2069\u2028next\U000e0041"
	id := f.enqueue(echoArgs{N: 1, Note: "memo\u202eabc"}, jobs.OperationID(op))
	c := f.claimOne("default", id, "w", time.Minute)
	if _, err := f.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Dead, Error: errText, Reason: "permanent"}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)

	// raw finds the first character shown as it is that should not be.
	const raw = `((s) => { const m = s.match(/(?![\t\n])[\p{Cc}\p{Cf}\u2028\u2029]/u);
		return m ? m[0].codePointAt(0).toString(16) : ''; })(document.getElementById('main').innerText + [...document.querySelectorAll('[title]')].map((e) => e.title).join(''))`

	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/job/default/"+id))
	waitJS(t, tb, "the job page", `document.getElementById('main').dataset.view === 'job' && !!document.getElementById('job-error')`)
	if got, want := evalJS[string](t, tb, `document.getElementById('job-error').textContent`), `declined\u009b2J \u2067spoof\u2069\u2028next\U000e0041`; got != want {
		t.Errorf("error shown as %q, want %q", got, want)
	}
	page := evalJS[string](t, tb, `document.getElementById('main').innerText`)
	if !strings.Contains(page, `refund-\u202egnp\u200b.exe`) || !strings.Contains(page, `memo\u202eabc`) {
		t.Errorf("the operation id or the args are not shown escaped: %q", page)
	}
	if c := evalJS[string](t, tb, raw); c != "" {
		t.Errorf("the job page shows U+%s as it is: %q", c, page)
	}

	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/jobs?state=dead"))
	waitJS(t, tb, "the dead list", `!!document.querySelector('#jobs a[data-job=`+jsString(id)+`]')`)
	list := evalJS[string](t, tb, `document.getElementById('jobs').innerText`)
	if !strings.Contains(list, `refund-\u202egnp\u200b.exe`) {
		t.Errorf("the list does not show the operation id escaped: %q", list)
	}
	if c := evalJS[string](t, tb, raw); c != "" {
		t.Errorf("the list shows U+%s as it is: %q", c, list)
	}
}
