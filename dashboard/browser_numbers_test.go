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
	"github.com/fencedq/fencedq/jobs"
)

type orderArgs struct {
	Order  int64  `json:"order"`
	Ledger uint64 `json:"ledger"`
	Card   string `json:"card" fencedq:"sensitive"`
}

func (orderArgs) Kind() string { return "order" }

// Args and outputs keep their numbers exactly (jobs.RedactJSON), and the
// job page shows them so: an id beyond 2^53 is not rounded to its nearest
// float64 on its way through the page's JSON parsing.
func TestBrowserJobPageShowsNumbersExactly(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	id := f.enqueue(orderArgs{Order: 1<<53 + 1, Ledger: 18446744073709551615, Card: secret})
	c := f.claimOne("default", id, "w", time.Minute)
	out := []byte(`{"receipt":12345678901234567891,"rate":0.30000000000000004441}`)
	if _, err := f.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: jobs.Succeeded, Output: out, OutputDisplay: out}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/job/default/"+id))
	waitJS(t, tb, "the job page", `!!document.getElementById('job-output')`)
	args := evalJS[string](t, tb, `document.getElementById('job-args').textContent`)
	for _, want := range []string{`"order": 9007199254740993`, `"ledger": 18446744073709551615`, `"card": "[redacted]"`} {
		if !strings.Contains(args, want) {
			t.Errorf("args shown %s, want %s in them", args, want)
		}
	}
	output := evalJS[string](t, tb, `document.getElementById('job-output').textContent`)
	for _, want := range []string{`"receipt": 12345678901234567891`, `"rate": 0.30000000000000004441`} {
		if !strings.Contains(output, want) {
			t.Errorf("output shown %s, want %s in it", output, want)
		}
	}
}
