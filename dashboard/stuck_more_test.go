package dashboard_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
)

// TestStuckSaysWhenMoreAreDue: with more jobs due than the stuck list
// holds, the answer says so (more) and the page says the list is not all
// of them, in one queue and over all; with all of them listed it says
// nothing of the kind.
func TestStuckSaysWhenMoreAreDue(t *testing.T) {
	f := newFixture(t)
	const n = 101 // one more than the page's list
	for i := range n {
		f.enqueue(echoArgs{N: i})
	}
	res, err := f.ledger.Claim(context.Background(), "default", "w", time.Minute, n)
	must(t, err)
	if len(res.Jobs) != n {
		t.Fatalf("claimed %d jobs, want %d", len(res.Jobs), n)
	}
	h := f.handler(dashboard.Options{StuckMargin: time.Hour}) // every lease is due within the margin
	for _, c := range []struct {
		path string
		jobs int
		more bool
	}{
		{"/api/stuck", 100, true},
		{"/api/stuck?queue=default", 100, true},
		{"/api/stuck?limit=7", 7, true},
		{"/api/stuck?limit=101", 101, false},
		{"/api/stuck?queue=default&limit=500", 101, false},
	} {
		var v struct {
			Jobs []struct{ ID string }
			More bool
		}
		getJSON(t, h, c.path, &v)
		if len(v.Jobs) != c.jobs || v.More != c.more {
			t.Errorf("%s: %d jobs, more %v; want %d, more %v", c.path, len(v.Jobs), v.More, c.jobs, c.more)
		}
	}

	exe := browser.NeedChromium(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/stuck"))
	waitJS(t, tb, "the stuck list", `document.querySelectorAll('#stuck a[data-job]').length === 100`)
	if got := evalJS[string](t, tb, `(document.getElementById('stuck-more') || {}).textContent || ''`); got == "" {
		t.Fatal("the stuck page does not say more jobs are due than it lists")
	}
}
