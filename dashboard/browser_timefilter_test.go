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
