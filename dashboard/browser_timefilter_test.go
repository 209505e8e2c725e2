package dashboard_test

import (
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
)

// TestBrowserTimeFilterIsInUTC: every time the pages show is in UTC (with
// a Z), so the list's time filter reads and writes UTC too, whatever the
// browser's time zone: a time copied from the list into the form filters
// on that instant, and applying the form keeps the filter in force.
func TestBrowserTimeFilterIsInUTC(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	f.deadJob("default", "op-dead")
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Call(tb.ctx, "Emulation.setTimezoneOverride", map[string]any{"timezoneId": "America/New_York"}, nil))
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/jobs?state=dead&from=2026-01-02T03:04:00.000Z"))
	waitJS(t, tb, "the list", `document.getElementById('main').dataset.view === 'jobs' && !!document.querySelector('#filters input[name=from]')`)
	if got := evalJS[string](t, tb, `document.querySelector('#filters input[name=from]').value`); got != "2026-01-02T03:04" {
		t.Errorf("the from filter 03:04Z shows as %q in the form, not in UTC as every time on the page", got)
	}
	click(t, tb, `#filters button[type=submit]`)
	waitJS(t, tb, "the list applied again", `new URLSearchParams(location.hash.split('?')[1]).get('from') !== null`)
	if got := evalJS[string](t, tb, `new URLSearchParams(location.hash.split('?')[1]).get('from')`); got != "2026-01-02T03:04:00.000Z" {
		t.Errorf("applying the form again moved the filter to %q", got)
	}
}

// TestBrowserTimeFilterKeepsWhatItFilters: a time filter given to the
// second (as the list's times are shown) or in unix milliseconds (which
// the API takes) shows in the form as the instant the list is filtered
// on, so applying the form again neither drops it nor moves it.
func TestBrowserTimeFilterKeepsWhatItFilters(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	f.deadJob("default", "op-dead")
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/"))
	waitJS(t, tb, "the overview", `!!document.querySelector('#queues')`)
	for _, from := range []string{"2026-01-02T03:04:05Z", "1767323045000"} { // the same instant
		navigate(t, tb, "#/jobs?state=dead&from="+from)
		waitJS(t, tb, "the list from "+from, `document.getElementById('main').dataset.view === 'jobs' && document.querySelector('#main h1').textContent.includes('from 2026-01-02 03:04:05Z')`)
		if got := evalJS[string](t, tb, `document.querySelector('#filters input[name=from]').value`); got != "2026-01-02T03:04:05" {
			t.Errorf("from=%s shows as %q in the form", from, got)
		}
		click(t, tb, `#filters button[type=submit]`)
		waitJS(t, tb, "the list applied again", `new URLSearchParams(location.hash.split('?')[1]).get('from') !== `+jsString(from))
		if got := evalJS[string](t, tb, `new URLSearchParams(location.hash.split('?')[1]).get('from')`); got != "2026-01-02T03:04:05.000Z" {
			t.Errorf("from=%s applied again is %q", from, got)
		}
	}
}
