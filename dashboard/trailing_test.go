package dashboard_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestActionBodiesRefuseTrailingData: every action's body is one JSON
// object and nothing after it; a second object ({...}{"action":"rerun"})
// or stray bytes get 400 and change nothing, as does a note holding
// control characters.
func TestActionBodiesRefuseTrailingData(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	sched := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	dead := f.deadJob("default", "op-dead")
	job := "/api/jobs/default/" + sched
	bulk := `{"action":"cancel","note":"x","jobs":[{"queue":"default","id":"` + sched + `"}]}`
	for _, c := range []struct{ path, body string }{
		{job + "/cancel", `{"note":"x"}{"note":"y"}`},
		{job + "/cancel", `{"note":"x"} trailing`},
		{job + "/cancel", `{"note":"x"}}`},
		{job + "/run-now", `{"note":"x"}[]`},
		{"/api/jobs/default/" + dead + "/resolve", `{"decision":"rerun","note":"x"}{"decision":"succeeded"}`},
		{"/api/queues/default/pause", `{"note":"x"}{}`},
		{"/api/bulk", bulk + `{"action":"rerun"}`},
		{"/api/bulk", bulk + `,`},
		// A note with terminal escapes is refused by jobs.Client's rules.
		{job + "/cancel", `{"note":"\u001b]0;pwned\u0007\u001b[2J"}`},
		{"/api/queues/default/pause", `{"note":"a\rb"}`},
	} {
		if res, body := act(t, h, c.path, c.body); res.StatusCode != http.StatusBadRequest || errCode(t, body) != "invalid" {
			t.Errorf("%s %s: %d %s, want 400 invalid", c.path, c.body, res.StatusCode, body)
		}
	}
	if s := f.state("default", sched); s != jobs.Pending {
		t.Fatalf("a refused action moved the scheduled job to %s", s)
	}
	if s := f.state("default", dead); s != jobs.Dead {
		t.Fatalf("a refused resolve moved the dead job to %s", s)
	}
	if p, err := f.insp.Paused(t.Context(), "default"); err != nil || p != nil {
		t.Fatalf("a refused pause: %+v %v", p, err)
	}
	// Trailing white space is no data.
	if res, body := act(t, h, job+"/cancel", "{\"note\":\"x\"}\n \t"); res.StatusCode != http.StatusOK {
		t.Fatalf("a body ending in white space: %d %s", res.StatusCode, body)
	}
}
