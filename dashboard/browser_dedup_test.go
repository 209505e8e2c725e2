package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

// The deduplicated events page says why each enqueue was deduplicated: a
// unique job whose key another job held (given an operation id or not) is
// not shown as an operation id already known, nor as a job found due again
// after it finished.
func TestBrowserDeduplicatedEventsNameTheirCause(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	byN := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"n"}})
	holder := f.enqueue(echoArgs{N: 1}, byN)
	f.enqueue(echoArgs{N: 1, Note: "again"}, byN)
	f.enqueue(echoArgs{N: 1, Note: "with an operation"}, byN, jobs.OperationID("given-op"))
	f.enqueue(echoArgs{N: 2}, jobs.OperationID("known-op"))
	f.enqueue(echoArgs{N: 3}, jobs.OperationID("known-op"))

	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/events/deduplicated"))
	waitJS(t, tb, "the deduplicated events", `document.getElementById('main').dataset.view === 'events' && document.querySelectorAll('#events tbody tr').length === 3`)
	rows := evalJS[[]string](t, tb, `[...document.querySelectorAll('#events tbody tr')].map((r) => r.textContent)`)
	for i, want := range []string{"operation known-op", "unique key held (operation given-op)", "unique key held"} {
		if !strings.Contains(rows[i], want) || strings.Contains(rows[i], "due again") {
			t.Errorf("event %d: %q, want %q in it", i, rows[i], want)
		}
	}
	for _, r := range rows[1:] {
		if !strings.Contains(r, holder) {
			t.Errorf("event %q does not link the holder %s", r, holder)
		}
	}
	intro := evalJS[string](t, tb, `document.querySelector('#main p.muted').textContent`)
	if !strings.Contains(intro, "unique") {
		t.Errorf("the page's introduction %q does not mention unique jobs", intro)
	}
}
