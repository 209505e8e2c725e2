package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// TestListOffsetPastTheBoundIsRefused: api/jobs pages at most 100 000
// jobs deep. An offset past that is refused (400 invalid, naming the
// bound), not read as the last page allowed: the pages' labels and their
// next link followed the offset asked for, so paging on showed the same
// jobs again and again under other numbers. The response names the bound
// so the pager stops at it.
func TestListOffsetPastTheBoundIsRefused(t *testing.T) {
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1})
	h := f.handler(dashboard.Options{})
	for _, off := range []string{"100001", "100050", "999999999"} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/api/jobs?state=pending&offset="+off, nil))
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid"`) ||
			!strings.Contains(string(body), "100000") {
			t.Errorf("offset %s: %d %s (want 400 invalid naming the bound)", off, res.StatusCode, body)
		}
	}
	var l struct {
		Offset    int `json:"offset"`
		MaxOffset int `json:"max_offset"`
		Total     int `json:"total"`
	}
	getJSON(t, h, "/api/jobs?state=pending&offset=100000", &l)
	if l.Offset != 100000 || l.MaxOffset != 100000 || l.Total != 1 {
		t.Errorf("the deepest page: %+v (want offset and max_offset 100000, total 1)", l)
	}
}
