package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserActionWithoutAnAnswerMayHaveBeenDone: an action whose answer
// never came from the dashboard (a proxy in front of it timed out and
// answered 504 with its own page, after the dashboard had acted) is shown
// as one that may have been done, with what to do, not as a bare failure
// the operator would take for "nothing happened".
func TestBrowserActionWithoutAnAnswerMayHaveBeenDone(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	id := f.deadJob("default", "op-dead")
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/resolve") {
			h.ServeHTTP(httptest.NewRecorder(), r) // done, its answer lost on the way
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusGatewayTimeout)
			_, _ = w.Write([]byte("<html><body>504 Gateway Time-out</body></html>"))
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	tb, watch := openBrowser(t, exe)
	watch.expectFailure(srv.URL + "/api/jobs/default/" + id + "/resolve")
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/job/default/"+id))
	waitJS(t, tb, "the re-run button", `!!document.querySelector('button.decide-rerun')`)
	click(t, tb, `button.decide-rerun`)
	waitJS(t, tb, "the answer", `/Failed/.test(document.querySelector('.resolve .status').textContent)`)
	if got := evalJS[string](t, tb, `document.querySelector('.resolve .status').textContent`); !strings.Contains(got, "may have been done") {
		t.Errorf("the page says %q after an action whose answer was lost", got)
	}
	if st := f.state("default", id); st != jobs.Pending {
		t.Fatalf("the re-run was not done (%s): the test does not lose an answer", st)
	}
}
