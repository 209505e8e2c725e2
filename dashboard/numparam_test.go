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

// Every numeric query parameter of the JSON API follows limit's rule:
// absent, the endpoint's default; an integer in the parameter's range, as
// given; anything else 400 invalid naming the parameter and its range,
// never cut to the range's end (an offset, a margin or a tick count past
// it would show another page, margin or count than asked, silently).
func TestAPINumericParamsFollowOneRule(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	for _, c := range []struct {
		path, name string
		lo, hi     int
	}{
		{"/api/jobs?state=pending&", "offset", 0, 100_000},
		{"/api/workflows?", "offset", 0, 10_000},
		{"/api/stuck?", "margin_ms", 0, 3_600_000},
		{"/api/schedules?id=hourly&", "ticks", 0, 100},
		{"/api/schedules?", "ticks", 0, 5},
	} {
		want := c.name + " must be an integer from " + strconv.Itoa(c.lo) + " to " + strconv.Itoa(c.hi)
		for _, bad := range []string{strconv.Itoa(c.lo - 1), strconv.Itoa(c.hi + 1), "99999999999999999999", "1.5", "ten"} {
			path := c.path + c.name + "=" + bad
			res, body := call(t, h, httptest.NewRequest(http.MethodGet, path, nil))
			var e struct{ Error, Code string }
			_ = json.Unmarshal(body, &e)
			if res.StatusCode != http.StatusBadRequest || e.Code != "invalid" || !strings.Contains(e.Error, want) {
				t.Errorf("GET %s: %d %s; want 400 invalid %q", path, res.StatusCode, body, want)
			}
		}
		for _, good := range []string{"", c.name + "=" + strconv.Itoa(c.lo), c.name + "=" + strconv.Itoa(c.hi)} {
			// A schedule id no leader recorded is 404: the parameter passed.
			res, body := call(t, h, httptest.NewRequest(http.MethodGet, c.path+good, nil))
			if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s: %d %s; want it served", c.path+good, res.StatusCode, body)
			}
		}
	}
}
