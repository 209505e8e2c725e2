package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestRunNowTwiceIsDoneOnce: a Run now sent twice (a double click, a form
// resubmitted, a request retried after its reply was lost) makes the job
// due once: the second answer says it is already due, and the job's
// history and the operator feed record the action once, whether it came
// from the job page or a bulk action, or with nothing seen (a script).
func TestRunNowTwiceIsDoneOnce(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	sends := map[string]struct{ path, body func(id string) string }{
		"job page": {
			func(id string) string { return "/api/jobs/later/" + id + "/run-now" },
			func(string) string { return `{"note":"customer waiting","state":"pending","token":"","runs":0}` },
		},
		"script": {
			func(id string) string { return "/api/jobs/later/" + id + "/run-now" },
			func(string) string { return `{"note":"customer waiting"}` },
		},
		"bulk": {
			func(string) string { return "/api/bulk" },
			func(id string) string {
				return `{"action":"run_now","state":"pending","note":"customer waiting","jobs":[{"queue":"later","id":"` + id + `"}]}`
			},
		},
	}
	for name, s := range sends {
		id := f.enqueue(echoArgs{N: 1}, jobs.Queue("later"), jobs.Delay(time.Hour))
		res, b := act(t, h, s.path(id), s.body(id))
		if res.StatusCode != http.StatusOK || (name == "bulk" && !strings.Contains(string(b), `"done":1`)) {
			t.Fatalf("%s: first run now: %d %s", name, res.StatusCode, b)
		}
		res, b = act(t, h, s.path(id), s.body(id))
		switch name {
		case "bulk":
			if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"done":0`) || !strings.Contains(string(b), "already due") {
				t.Errorf("%s: second run now: %d %s (want the job listed as already due)", name, res.StatusCode, b)
			}
		default:
			if res.StatusCode != http.StatusConflict || !strings.Contains(string(b), "already due") {
				t.Errorf("%s: second run now: %d %s (want 409 saying it is already due)", name, res.StatusCode, b)
			}
		}
		hist, err := f.insp.History(t.Context(), "later", id)
		must(t, err)
		n := 0
		for _, e := range hist {
			if e.Event == "run_now" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: the job's history records run now %d times, want once: %+v", name, n, hist)
		}
		evs, err := f.insp.Events(t.Context(), "later", 1000)
		must(t, err)
		n = 0
		for _, e := range evs {
			if e.Type == "run_now" && e.Job == id {
				n++
				if e.Actor != "operator:"+user || e.Note != "customer waiting" {
					t.Errorf("%s: run now recorded as %q %q", name, e.Actor, e.Note)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: the operator feed records run now %d times, want once", name, n)
		}
	}
}
