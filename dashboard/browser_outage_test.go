package dashboard_test

import (
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A page that refreshes itself (pools, limits, schedules, workflows,
// history, as the overview and the stuck jobs) shows the error while Redis
// does not answer, and comes back by itself once it does: an operator
// watching it through a failover never has to reload.
func TestBrowserPagesRecoverFromARedisOutage(t *testing.T) {
	exe := browser.NeedChromium(t)
	// The outage is a Redis down (killed, then restarted on its port with
	// its data): requests fail at once, with no timeout to race on a
	// loaded machine (a paused Redis needs a short request timeout, which
	// the first requests after it also hit).
	srv := redistest.Start(t, redistest.Options{AOF: true})
	c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: "outage"})
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Enqueue(t.Context(), echoArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(nil, c, dashboard.Options{})
	must(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, hs.URL+"/#/"))
	waitJS(t, tb, "the overview", `!!document.querySelector('#queues')`)
	for _, pg := range []struct{ hash, view string }{
		{"#/pools", "pools"}, {"#/limits", "limits"}, {"#/history", "history"},
		{"#/schedules", "schedules"}, {"#/workflows", "workflows"}, {"#/stuck", "stuck"},
	} {
		srv.Kill()
		navigate(t, tb, pg.hash)
		waitJS(t, tb, pg.hash+" showing the outage", `!!document.querySelector('#main .error')`)
		srv.Restart() // Kill left it down: this starts it again
		waitJS(t, tb, pg.hash+" back after the outage",
			`document.getElementById('main').dataset.view === `+jsString(pg.view)+` && !document.querySelector('#main .error')`)
	}
}

// TestBrowserEveryPageRecoversFromARedisOutage: a page that does not
// refresh itself (the attention page, a list, the events, a job's page,
// search) but could not be read because Redis was down tries again too,
// so it comes back by itself once Redis answers; one refused for what it
// asks (a job that does not exist) stays as it is.
func TestBrowserEveryPageRecoversFromARedisOutage(t *testing.T) {
	exe := browser.NeedChromium(t)
	srv := redistest.Start(t, redistest.Options{AOF: true})
	c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: "outage"})
	t.Cleanup(func() { _ = c.Close() })
	res, err := c.Enqueue(t.Context(), echoArgs{N: 1}, jobs.OperationID("op-outage"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(nil, c, dashboard.Options{})
	must(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, hs.URL+"/#/"))
	waitJS(t, tb, "the overview", `!!document.querySelector('#queues')`)
	for _, pg := range []struct{ hash, view string }{
		{"#/attention", "attention"}, {"#/jobs?state=pending", "jobs"}, {"#/events/operator", "events"},
		{"#/job/default/" + res.JobID, "job"}, {"#/search/op-outage", "search"},
	} {
		srv.Kill()
		navigate(t, tb, pg.hash)
		waitJS(t, tb, pg.hash+" showing the outage", `!!document.querySelector('#main .error')`)
		srv.Restart() // Kill left it down: this starts it again
		waitJS(t, tb, pg.hash+" back after the outage",
			`document.getElementById('main').dataset.view === `+jsString(pg.view)+` && !document.querySelector('#main .error')`)
	}
	navigate(t, tb, "#/job/default/no-such-job")
	waitJS(t, tb, "a job that does not exist", `!!document.querySelector('#main .error')`)
	if got := evalJS[string](t, tb, `document.querySelector('#main .error').dataset.retry || ''`); got != "" {
		t.Errorf("the page of a job that does not exist retries (%q): it was refused, not unreadable", got)
	}
}
