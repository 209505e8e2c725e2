package dashboard_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserLimitsPageNoneIsTrue: the limits page lists the limits and
// rates that hold jobs back; with none listed it says so, not that no
// limit has holders or no rate was seen, while a key at its limit runs all
// its jobs (nothing parked) and a rate has starts below its max.
func TestBrowserLimitsPageNoneIsTrue(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	lim := jobs.Limit("export:a", 2)
	f.enqueue(echoArgs{N: 1}, lim)
	f.enqueue(echoArgs{N: 2}, lim)
	f.enqueue(echoArgs{N: 3}, jobs.Rate("provider", 5, time.Hour))
	r, err := f.ledger.Claim(ctx, jobs.DefaultQueue, "w", time.Minute, 3)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v %v", r, err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/limits"))
	waitJS(t, tb, "the limits page", `!!document.getElementById('limits-none') && !!document.getElementById('rates-none')`)
	if got, want := evalJS[string](t, tb, `document.getElementById('limits-none').textContent`), "No limit holds jobs back."; got != want {
		t.Errorf("with 2 of 2 permits held and nothing parked the page says %q, want %q", got, want)
	}
	if got, want := evalJS[string](t, tb, `document.getElementById('rates-none').textContent`), "No rate limit holds jobs back."; got != want {
		t.Errorf("with 1 start of 5 the page says %q, want %q", got, want)
	}
}
