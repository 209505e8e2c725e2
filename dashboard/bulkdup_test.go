package dashboard_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestBulkListingAJobTwiceIsRefused: a bulk action whose list names a job
// twice is refused before touching any job, so its counts never say two
// jobs were acted on when one was.
func TestBulkListingAJobTwiceIsRefused(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	ref := `{"queue":"default","id":"` + id + `"}`
	for _, action := range []string{"run_now", "cancel"} {
		res, body := act(t, h, "/api/bulk", `{"action":"`+action+`","note":"x","jobs":[`+ref+`,`+ref+`]}`)
		var e struct{ Code string }
		_ = json.Unmarshal(body, &e)
		if res.StatusCode != http.StatusBadRequest || e.Code != "invalid" {
			t.Fatalf("bulk %s listing %s twice: %d %s", action, id, res.StatusCode, body)
		}
	}
	if st := f.state("default", id); st != jobs.Pending {
		t.Fatalf("job %s is %s after refused bulk actions", id, st)
	}
	rec, err := f.insp.Get(t.Context(), "default", id)
	must(t, err)
	if !rec.RunAt.After(time.Now().Add(30 * time.Minute)) {
		t.Fatalf("job %s was made due by a refused bulk action: run_at %v", id, rec.RunAt)
	}
}
