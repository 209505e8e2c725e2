package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// uncertainBurst claims n jobs of queue default in one call and commits
// them uncertain in one call (one script run, so one minute), returning
// their ids.
func (f *fixture) uncertainBurst(n int) []string {
	f.t.Helper()
	ctx := context.Background()
	for range n {
		f.enqueue(echoArgs{N: 1})
	}
	res, err := f.ledger.Claim(ctx, "default", "w1", time.Minute, n)
	must(f.t, err)
	if len(res.Jobs) != n {
		f.t.Fatalf("claimed %d of %d jobs", len(res.Jobs), n)
	}
	var cs []ledger.Completion
	var ids []string
	for _, c := range res.Jobs {
		cs = append(cs, ledger.Completion{ID: c.ID, Token: c.Token, Outcome: ledger.Outcome{To: jobs.Uncertain, Reason: "deadline passed mid-call"}})
		ids = append(ids, c.ID)
	}
	_, err = f.ledger.Complete(ctx, "default", cs)
	must(f.t, err)
	return ids
}

// TestBrowserChartsShowShortEpisodes: an uncertain episode of a few
// seconds, resolved before anyone looked and with no maintenance leader
// alive, is on the chart with its real peak; an empty chart has no peak;
// and the page follows new counts without a reload.
func TestBrowserChartsShowShortEpisodes(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range f.uncertainBurst(3) {
		_, err := f.client.Resolve(ctx, "default", id, jobs.DecideSucceeded, "alice", "confirmed")
		must(t, err)
	}
	srv := f.serveOps()
	tb, watch := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/#/history"))
	waitJS(t, tb, "the history charts", `document.getElementById('main').dataset.view === 'history' && !!document.getElementById('chart-uncertain')`)
	chart := func(name, attr string) string {
		return evalJS[string](t, tb, `document.getElementById('chart-`+name+`').dataset.`+attr)
	}
	caption := func(name string) string {
		return evalJS[string](t, tb, `document.querySelector('#chart-`+name+` figcaption').textContent`)
	}
	if chart("uncertain", "total") != "3" || chart("uncertain", "peak") != "3" || chart("uncertain", "bars") != "1" {
		t.Errorf("uncertain chart: total %s, peak %s, bars %s", chart("uncertain", "total"), chart("uncertain", "peak"), chart("uncertain", "bars"))
	}
	if c := caption("uncertain"); !strings.Contains(c, "3 in the window, peak 3 a 1 min; now 0") {
		t.Errorf("uncertain caption: %q", c)
	}
	if chart("throughput", "total") != "3" {
		t.Errorf("succeeded chart total %s, want the 3 resolved", chart("throughput", "total"))
	}
	// Nothing went to review: no bar and no peak, whatever the axis shows.
	if c := caption("review"); chart("review", "peak") != "0" || chart("review", "bars") != "0" || strings.Contains(c, "peak") || !strings.Contains(c, "0 in the window; now 0") {
		t.Errorf("review chart: peak %s, bars %s, caption %q", chart("review", "peak"), chart("review", "bars"), caption("review"))
	}
	// A second burst, left uncertain, shows up without a reload.
	f.uncertainBurst(2)
	waitJS(t, tb, "the chart to follow the counts", `document.getElementById('chart-uncertain').dataset.total === '5' && document.querySelector('#chart-uncertain figcaption').textContent.includes('now 2')`)
	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}
