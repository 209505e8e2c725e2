package dashboard_test

import (
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestBrowserAgesAreOnTheNamespacesTime: Redis's clock is 10 hours ahead
// of the host's (the browser's and the dashboard's). Every time the pages
// show is on the namespace's time, so the ages they show ("… ago") are
// measured on it too: a queue paused, a workflow started and a job made
// uncertain a moment ago read as a moment ago, not 10 hours.
func TestBrowserAgesAreOnTheNamespacesTime(t *testing.T) {
	exe := browser.NeedChromium(t)
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	srv.SetClockOffset(10 * time.Hour)
	rdb := srv.Client()
	f := &fixture{t: t, rdb: rdb, ns: redistest.Namespace(t), logs: &syncbuf.Buffer{}}
	f.client = jobs.NewClient(rdb, jobs.Config{Namespace: f.ns})
	t.Cleanup(func() { _ = f.client.Close() })
	f.insp = f.client.Inspector()
	f.ledger = ledger.New(rdb, ledger.Config{Namespace: f.ns})
	ctx := t.Context()

	f.reviewJob("default", echoArgs{N: 1}, "op-review")
	if _, err := workflow.Enqueue(ctx, f.client, workflow.New("order").Add("charge", echoArgs{N: 2}, workflow.Options(jobs.Queue("flows")))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Pause(ctx, "default", "bob", "maintenance"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(hs.Close)
	tb, _ := openBrowser(t, exe)

	// under an hour: no hours in the duration before " ago"
	age := regexp.MustCompile(`([0-9][0-9.hms]*) ago`)
	check := func(where, text string) {
		t.Helper()
		m := age.FindAllStringSubmatch(text, -1)
		if len(m) == 0 {
			t.Fatalf("%s shows no age: %q", where, text)
		}
		for _, a := range m {
			if regexp.MustCompile(`^\d+h`).MatchString(a[1]) {
				t.Errorf("%s shows an age of %s for a moment ago (the browser's clock, not the namespace's time): %q", where, a[1], text)
			}
		}
	}

	must(t, tb.page.Navigate(tb.ctx, hs.URL+"/#/workflows"))
	waitJS(t, tb, "the workflows", `!!document.querySelector('#workflows tr[data-workflow]')`)
	check("the workflows page", evalJS[string](t, tb, `document.getElementById('workflows').innerText`))

	navigate(t, tb, "#/attention")
	waitJS(t, tb, "the review job", `!!document.querySelector('#review article.card')`)
	check("the attention page", evalJS[string](t, tb, `document.querySelector('#review article.card dl').innerText`))

	navigate(t, tb, "#/")
	waitJS(t, tb, "the paused queue", `!!document.getElementById('paused')`)
	check("the overview", evalJS[string](t, tb, `document.getElementById('paused').innerText`))
}
