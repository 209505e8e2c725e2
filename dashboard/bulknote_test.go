package dashboard_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestBulkRefusesBadNote: a bulk action whose note holds terminal control
// sequences is refused once with 400, before any job is tried, not
// answered 200 with every selected job failing on its own.
func TestBulkRefusesBadNote(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	a := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	b := f.enqueue(echoArgs{N: 2}, jobs.Delay(time.Hour))
	body := `{"action":"cancel","note":"\u001b]0;pwned\u0007\u001b[2J","jobs":[{"queue":"default","id":"` + a + `"},{"queue":"default","id":"` + b + `"}]}`
	if res, out := act(t, h, "/api/bulk", body); res.StatusCode != http.StatusBadRequest || errCode(t, out) != "invalid" {
		t.Fatalf("bulk cancel with a control sequence in its note: %d %s", res.StatusCode, out)
	}
	if f.state("default", a) != jobs.Pending || f.state("default", b) != jobs.Pending {
		t.Fatal("a refused bulk cancel changed a job")
	}
}
