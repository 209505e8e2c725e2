package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// TestDashboardCommandDotSegments: fencedq dashboard answers an API path
// with an empty, "." or ".." segment with the dashboard's JSON 404, as the
// handler does alone, instead of a redirect to the cleaned path that a
// client follows with its POST body and credentials: a cancel sent for job
// "x/../<id>" must not cancel job <id>.
func TestDashboardCommandDotSegments(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue(jobs.Delay(time.Hour))
	base := e.startDashboard("--dashboard-token", "script-token", "--unfenced")
	for _, p := range []string{"api/jobs/default/x/../" + id + "/cancel", "api//jobs/default/" + id + "/cancel",
		"api/jobs/default/./" + id + "/cancel"} {
		req, err := http.NewRequest(http.MethodPost, base+p, strings.NewReader(`{"note":"dot segments"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = "//" + req.URL.Host + "/" + p // sent as written, not cleaned
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer script-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || err != nil || body.Code != "not_found" {
			t.Errorf("POST %s: %s (%v) code %q; want 404 not_found", p, resp.Status, err, body.Code)
		}
	}
	if s := e.state(id); s != jobs.Pending {
		t.Fatalf("job %s is %s after POSTs to paths with dot segments; want it left pending", id, s)
	}
	for _, p := range []string{"metrics", "healthz"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
}
