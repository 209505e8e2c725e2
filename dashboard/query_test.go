package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestMalformedOrRepeatedQueryIsRefused: a query parameter Go's parser
// drops (a bad %-escape, a ';' separator) or one given twice is answered
// 400 on every API endpoint, never read as absent or as its first value:
// a list filtered on queue=%zz listed every queue's jobs, and a selection
// for a bulk action (select=1) would have named them all.
func TestMalformedOrRepeatedQueryIsRefused(t *testing.T) {
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1}, jobs.Queue("a"))
	f.enqueue(echoArgs{N: 2}, jobs.Queue("b"))
	h := f.handler(dashboard.Options{})
	for _, q := range []string{
		"/api/jobs?state=pending&queue=%zz",
		"/api/jobs?state=pending&queue=%zz&select=1",
		"/api/jobs?state=pending&queue=a;b",
		"/api/jobs?state=pending&queue=b&queue=a",
		"/api/jobs?state=pending&queue=a&offset=0&offset=1",
		"/api/jobs?state=pending&queue=a&select=1&select=0",
		"/api/stuck?limit=1&limit=2",
		"/api/events?type=%",
		"/api/search?q=x&q=y",
		"/api/workflows?id=%g0",
		"/api/series?window=1h&window=24h",
	} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, q, nil))
		var e struct{ Error, Code string }
		_ = json.Unmarshal(body, &e)
		if res.StatusCode != http.StatusBadRequest || e.Code != "invalid" || !strings.Contains(e.Error, "query") {
			t.Errorf("%s: %d %s, want 400 invalid naming the query", q, res.StatusCode, body)
		}
	}
	// A well-formed query is served, an empty value and an encoded
	// separator included.
	for _, q := range []string{"/api/jobs?state=pending&queue=a&kind=", "/api/search?q=a%3Bb"} {
		if res, body := call(t, h, httptest.NewRequest(http.MethodGet, q, nil)); res.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", q, res.StatusCode, body)
		}
	}
}
