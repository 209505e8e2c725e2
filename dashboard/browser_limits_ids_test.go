package dashboard_test

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserLimitsPageNamesEachJob: the limits page names a limit's
// holders and a group's next job by their whole ids. Jobs enqueued with an
// operation id have ids "=<queue>=<operation id>": cut to their first
// characters, every holder in queue "default" would read "=default".
func TestBrowserLimitsPageNamesEachJob(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	lim := jobs.Limit("export:a", 2)
	h1 := f.enqueue(echoArgs{N: 1}, lim, jobs.OperationID("order-1"))
	f.claimOne(jobs.DefaultQueue, h1, "w", time.Minute)
	h2 := f.enqueue(echoArgs{N: 2}, lim, jobs.OperationID("order-2"))
	f.claimOne(jobs.DefaultQueue, h2, "w", time.Minute)
	f.enqueue(echoArgs{N: 3}, lim, jobs.OperationID("order-3")) // parked
	head := f.enqueue(echoArgs{N: 4}, jobs.Group("acme"), jobs.Queue("grouped"), jobs.OperationID("order-4"))
	f.enqueue(echoArgs{N: 5}, jobs.Group("acme"), jobs.Queue("grouped"), jobs.OperationID("order-5"))

	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/limits"))
	waitJS(t, tb, "the limits page", `!!document.querySelector('#limits tr[data-limit="export:a"]') && !!document.querySelector('#groups tr[data-group="acme"]')`)
	holders := evalJS[[]string](t, tb, `[...document.querySelectorAll('#limits tr[data-limit="export:a"] a')].map((a) => a.textContent.trim())`)
	slices.Sort(holders)
	if want := []string{h1, h2}; !slices.Equal(holders, want) {
		t.Errorf("holders shown as %q, want %q", holders, want)
	}
	if got := evalJS[string](t, tb, `document.querySelector('#groups tr[data-group="acme"] a').textContent.trim()`); got != head {
		t.Errorf("the group's next job shown as %q, want %q", got, head)
	}
}
