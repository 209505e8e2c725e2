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
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserListSaysWhatAParkedJobWaitsFor: a job put back with a reason
// (its resource was busy) and parked on its full limit at its next claim
// is listed as waiting for that limit, not by the put-back's reason, which
// no longer says why it does not run.
func TestBrowserListSaysWhatAParkedJobWaitsFor(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	lim := jobs.Limit("export:c1", 2)
	a := f.enqueue(echoArgs{N: 1}, lim)
	f.enqueue(echoArgs{N: 2}, lim)
	res, err := f.ledger.Claim(ctx, "default", "w", time.Minute, 2)
	if err != nil || len(res.Jobs) != 2 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	// two jobs enqueued in one millisecond are claimed in either order
	ja := res.Jobs[0]
	if ja.ID != a {
		ja = res.Jobs[1]
	}
	if ja.ID != a {
		t.Fatalf("claim did not take %s: %+v", a, res)
	}
	// a's resource was busy: put back, due again shortly
	if _, err := f.ledger.Complete(ctx, "default", []ledger.Completion{{ID: a, Token: ja.Token,
		Outcome: ledger.Outcome{Defer: true, Reason: "resource busy", RetryIn: 200 * time.Millisecond}}}); err != nil {
		t.Fatal(err)
	}
	h2 := f.enqueue(echoArgs{N: 3}, lim) // takes the permit a gave back
	f.claimOne("default", h2, "w", time.Minute)
	// a comes due and is parked: the two others hold the limit
	deadline := time.Now().Add(testsignal.Timeout())
	for parked := false; !parked; {
		if time.Now().After(deadline) {
			t.Fatalf("job %s was not parked on its limit", a)
		}
		r, err := f.ledger.Claim(ctx, "default", "w", time.Minute, 1)
		if err != nil || len(r.Jobs) > 0 {
			t.Fatalf("claim: %+v %v", r, err)
		}
		for _, d := range r.Dropped {
			parked = parked || d.ID == a && d.State == "limit:export"
		}
		if !parked {
			time.Sleep(20 * time.Millisecond) // polling for a's due time, not an assertion
		}
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/jobs?state=pending"))
	row := `document.querySelector('#jobs a[data-job=` + jsString(a) + `]')`
	waitJS(t, tb, "the pending list", `!!`+row)
	got := evalJS[string](t, tb, row+`.closest('tr').innerText`)
	if !strings.Contains(got, "waiting for limit export:c1, 2 of 2 held") || strings.Contains(got, "resource busy") {
		t.Errorf("the pending list's row of %s does not say what it waits for: %q", a, got)
	}
}
