package dashboard_test

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserHistoryShowsNotAppliedDead: a job whose last allowed attempt
// the reconciler found not applied went dead; the job page's history says
// so (outcome=dead beside decision=rerun), not a bare re-run.
func TestBrowserHistoryShowsNotAppliedDead(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	id := f.enqueue(echoArgs{N: 1}, jobs.MaxRetries(0))
	c := f.claimOne("default", id, "w", time.Minute)
	if _, err := f.ledger.Complete(t.Context(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Uncertain, Reason: "abandoned"}}}); err != nil {
		t.Fatal(err)
	}
	d := time.Second
	if s, err := f.ledger.Decide(t.Context(), "default", id, ledger.Resolution{From: []jobs.State{jobs.Uncertain},
		Decision: jobs.DecideRerun, Actor: "reconciler", Note: "not applied", RetryIn: &d}); err != nil || s != jobs.Dead {
		t.Fatalf("decide: %s %v, want dead", s, err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/job/default/"+id))
	waitJS(t, tb, "the job page", `[...document.querySelectorAll('table.history td.details')].some((td) => td.textContent.includes('decision='))`)
	details := evalJS[[]string](t, tb, `[...document.querySelectorAll('table.history td.details')].map((td) => td.textContent)`)
	if !slices.ContainsFunc(details, func(s string) bool {
		return strings.Contains(s, "decision=rerun") && strings.Contains(s, "outcome=dead")
	}) {
		t.Errorf("history details %q, want the resolve entry to say outcome=dead", details)
	}
}
