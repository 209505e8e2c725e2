package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
)

// TestBrowserPagePastTheEndLeadsBack: a list page past the last job (an
// old link, or jobs that moved on since) says so and links straight to
// the last page that holds jobs, not to the page before the empty one.
func TestBrowserPagePastTheEndLeadsBack(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	for _, op := range []string{"op-a", "op-b", "op-c"} {
		f.deadJob("default", op)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/jobs?state=dead&offset=1000"))
	waitJS(t, tb, "the empty page", `!!document.getElementById('pager') && document.getElementById('main').dataset.view === 'jobs'`)
	if txt := evalJS[string](t, tb, `document.getElementById('pager').textContent`); !strings.Contains(txt, "past the end") {
		t.Errorf("the pager does not say the page is past the end: %q", txt)
	}
	if href := evalJS[string](t, tb, `(document.querySelector('#pager a[rel=prev]') || {}).hash || ''`); href != "#/jobs?state=dead" {
		t.Errorf("the way back goes to %q, want the last page holding jobs (#/jobs?state=dead)", href)
	}
	click(t, tb, `#pager a[rel=prev]`)
	waitJS(t, tb, "the last page", `document.querySelectorAll('#jobs tbody a[data-job]').length === 3`)
}
