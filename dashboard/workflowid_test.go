package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestWorkflowIDIsBounded: api/workflows?id= (open to every reader) takes
// an id of at most 200 bytes, as every other id: a longer one is refused
// with 400 before it is sent to Redis once per queue.
func TestWorkflowIDIsBounded(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	for _, c := range []struct {
		id   string
		code int
		err  string
	}{
		{strings.Repeat("w", 201), http.StatusBadRequest, "invalid"},
		{strings.Repeat("w", 200), http.StatusNotFound, "not_found"},
		{"wf-no-such", http.StatusNotFound, "not_found"},
	} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/api/workflows?id="+c.id, nil))
		var e struct{ Code string }
		_ = json.Unmarshal(body, &e)
		if res.StatusCode != c.code || e.Code != c.err {
			t.Errorf("id of %d bytes: %d %s", len(c.id), res.StatusCode, body)
		}
	}
}
