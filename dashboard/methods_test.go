package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestWrongMethodOnAnEndpoint: an API endpoint asked with a method it does
// not serve answers 405 with Allow and a JSON error, not 404 "no such
// endpoint"; a GET of an action never acts.
func TestWrongMethodOnAnEndpoint(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/api/overview", "GET, HEAD"},
		{http.MethodDelete, "/api/jobs/default/j1", "GET, HEAD"},
		{http.MethodGet, "/api/bulk", "POST"},
		{http.MethodGet, "/api/jobs/default/j1/cancel", "POST"},
		{http.MethodPut, "/api/queues/default/pause", "POST"},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader("{}"))
		r.SetBasicAuth(user, pass)
		res, body := call(t, h, r)
		var e struct{ Code string }
		_ = json.Unmarshal(body, &e)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != c.allow || e.Code != "method_not_allowed" {
			t.Errorf("%s %s: %d Allow %q %s", c.method, c.path, res.StatusCode, res.Header.Get("Allow"), body)
		}
	}
	res, body := call(t, h, httptest.NewRequest(http.MethodPost, "/api/no-such", nil))
	if res.StatusCode != http.StatusNotFound || res.Header.Get("Allow") != "" {
		t.Errorf("POST /api/no-such: %d Allow %q %s", res.StatusCode, res.Header.Get("Allow"), body)
	}
}
