package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestBooleanParametersMeanWhatTheySay: the API's yes-or-no parameters
// (prefix, history, select) take 1 or true and 0 or false; prefix=false
// searches no prefixes and select=true selects, rather than either being
// taken as its opposite, and any other value is refused (400) rather than
// read as no.
func TestBooleanParametersMeanWhatTheySay(t *testing.T) {
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1}, jobs.OperationID("order-123"))
	h := f.handler(dashboard.Options{})

	var m struct{ Matches []any }
	getJSON(t, h, "/api/search?q=order&prefix=false", &m)
	if len(m.Matches) != 0 {
		t.Errorf("prefix=false searched prefixes: %+v", m.Matches)
	}
	getJSON(t, h, "/api/search?q=order&prefix=true", &m)
	if len(m.Matches) != 1 {
		t.Errorf("prefix=true: %+v", m.Matches)
	}
	var l struct {
		Jobs      []struct{ History []any }
		Selection []any
	}
	getJSON(t, h, "/api/jobs?state=pending&select=true&history=true", &l)
	if len(l.Selection) != 1 || len(l.Jobs) != 1 || len(l.Jobs[0].History) == 0 {
		t.Errorf("select=true&history=true: %+v", l)
	}
	for _, q := range []string{"/api/jobs?state=pending&select=yes", "/api/jobs?state=pending&history=2", "/api/search?q=order&prefix=maybe"} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, q, nil))
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "must be") {
			t.Errorf("%s: %d %s (want 400)", q, res.StatusCode, body)
		}
	}
}
