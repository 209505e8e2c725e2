package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestAPIPathWithDotOrEmptySegments: an API path with an empty, "." or
// ".." segment is answered with a JSON 404, not with a redirect (an HTML
// body, and under a bare http.StripPrefix a Location outside the mount);
// an encoded slash in a job id is part of the id.
func TestAPIPathWithDotOrEmptySegments(t *testing.T) {
	f := newFixture(t)
	h := http.StripPrefix("/ops", f.handler(dashboard.Options{Username: user, Password: pass}))
	for _, p := range []string{"/ops/api//overview", "/ops/api/./overview", "/ops//api/overview",
		"/ops/api/jobs/default/../x", "/ops/api/jobs/default/x/../y/cancel", "/ops/api/queues/default/./pause"} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			r := httptest.NewRequest(m, p, strings.NewReader(`{"note":"x"}`))
			r.Header.Set("Content-Type", "application/json")
			r.SetBasicAuth(user, pass)
			res, body := call(t, h, r)
			var e struct{ Code string }
			if res.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Code != "not_found" ||
				res.Header.Get("Location") != "" {
				t.Errorf("%s %s: %d Location %q %s", m, p, res.StatusCode, res.Header.Get("Location"), body)
			}
		}
	}
	// "api" itself, without its slash: no endpoint, and no redirect to
	// "/api/", which lies outside the mount.
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		res, body := call(t, h, httptest.NewRequest(m, "/ops/api", nil))
		var e struct{ Code string }
		if res.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Code != "not_found" ||
			res.Header.Get("Location") != "" {
			t.Errorf("%s /ops/api: %d Location %q %s", m, res.StatusCode, res.Header.Get("Location"), body)
		}
	}
	res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/ops/api/jobs/default/a%2F..%2Fb", nil))
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(e.Error, "no such job") {
		t.Fatalf("job id holding an encoded slash: %d %s", res.StatusCode, body)
	}
	var ov struct{ Namespace string }
	if getJSON(t, h, "/ops/api/overview", &ov); ov.Namespace != f.ns {
		t.Fatalf("overview: %+v", ov)
	}
}
