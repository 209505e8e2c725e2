package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
)

// Every JSON API endpoint that takes a limit reads it by one rule: absent,
// the endpoint's default; an integer from 1 to the endpoint's maximum, as
// given; anything else (0, negative, past the maximum, not an integer) 400
// invalid, naming the parameter and its range. None cuts a limit to its
// maximum, so a page is never shorter than asked without saying so.
func TestAPILimitsFollowOneRule(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	for _, c := range []struct {
		path string
		max  int
	}{
		{"/api/jobs?state=pending&", 200},
		{"/api/events?", 1000},
		{"/api/stuck?", 500},
		{"/api/workflows?", 100},
	} {
		for _, bad := range []string{"0", "-1", strconv.Itoa(c.max + 1), "ten"} {
			path := c.path + "limit=" + bad
			res, body := call(t, h, httptest.NewRequest(http.MethodGet, path, nil))
			var e struct{ Error, Code string }
			_ = json.Unmarshal(body, &e)
			want := "limit must be an integer from 1 to " + strconv.Itoa(c.max)
			if res.StatusCode != http.StatusBadRequest || e.Code != "invalid" || !strings.Contains(e.Error, want) {
				t.Errorf("GET %s: %d %s; want 400 invalid %q", path, res.StatusCode, body, want)
			}
		}
		for _, good := range []string{"", "limit=1", "limit=" + strconv.Itoa(c.max)} {
			var v map[string]any
			getJSON(t, h, c.path+good, &v)
		}
	}
}
