package dashboard_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	srv := redistest.Start(t, redistest.Options{})
	// Requests give up at the dashboard's timeout while Redis is stopped.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c := jobs.NewClient(rdb, jobs.Config{Namespace: "outage"})
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Enqueue(t.Context(), echoArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(nil, c, dashboard.Options{Timeout: 300 * time.Millisecond})
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
		srv.Pause()
		navigate(t, tb, pg.hash)
		waitJS(t, tb, pg.hash+" showing the outage", `!!document.querySelector('#main .error')`)
		srv.Resume()
		waitJS(t, tb, pg.hash+" back after the outage",
			`document.getElementById('main').dataset.view === `+jsString(pg.view)+` && !document.querySelector('#main .error')`)
	}
}
