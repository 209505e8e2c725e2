package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// TestCancelAndRunNowKeepToWhatThePageShowed: the job page's Cancel and
// Run now act on the job as the page showed it. A scheduled job that
// started running before the click is neither asked to stop nor touched:
// 409 wrong_state, saying what it was seen as and what it is now.
func TestCancelAndRunNowKeepToWhatThePageShowed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.enqueue(echoArgs{N: 1}, jobs.Queue("later"), jobs.Delay(time.Hour))
	var page struct {
		Job struct{ State, Token string } `json:"job"`
	}
	getJSON(t, h, "/api/jobs/later/"+id, &page)
	if page.Job.State != "pending" || page.Job.Token != "" {
		t.Fatalf("page: %+v", page.Job)
	}
	// The job starts before the operator confirms.
	cl, err := f.ledger.ClaimJob(ctx, "later", id, "w1", time.Minute)
	must(t, err)
	for _, a := range []string{"cancel", "run-now"} {
		body, _ := json.Marshal(map[string]string{"note": "not needed after all", "state": page.Job.State, "token": page.Job.Token})
		res, b := act(t, h, "/api/jobs/later/"+id+"/"+a, string(body))
		if res.StatusCode != http.StatusConflict || !strings.Contains(string(b), `"code":"wrong_state"`) ||
			!strings.Contains(string(b), "seen pending") || !strings.Contains(string(b), "now running") {
			t.Errorf("%s of the scheduled job seen: %d %s (want 409 wrong_state, seen pending, now running)", a, res.StatusCode, b)
		}
	}
	rec, err := f.ledger.Get(ctx, "later", id)
	must(t, err)
	if rec.State != jobs.Running || rec.Token != cl.Token || rec.CancelledBy != "" {
		t.Fatalf("the stale actions landed: %s token %d cancel %q", rec.State, rec.Token, rec.CancelledBy)
	}
	// What the page shows now applies.
	body, _ := json.Marshal(map[string]string{"note": "stop it", "state": "running", "token": cl.Token.String()})
	if res, b := act(t, h, "/api/jobs/later/"+id+"/cancel", string(body)); res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"stop_requested":true`) {
		t.Fatalf("cancel of the running job seen: %d %s", res.StatusCode, b)
	}
	// A bad state or token is refused before anything is done.
	for _, bad := range []string{
		`{"note":"x","state":"sleeping"}`,
		`{"note":"x","state":"pending","token":"x"}`,
		`{"note":"x","token":"1"}`,
	} {
		if res, b := act(t, h, "/api/jobs/later/"+id+"/run-now", bad); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s (want 400)", bad, res.StatusCode, b)
		}
	}
}

// TestBulkCancelAndRunNowKeepToTheSelectedState: a bulk cancel or run-now
// confirmed over the scheduled jobs of a filter leaves alone a job that
// started running since it was selected (reported wrong_state).
func TestBulkCancelAndRunNowKeepToTheSelectedState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	for _, action := range []string{"cancel", "run_now"} {
		q := "bulk-" + strings.ReplaceAll(action, "_", "-")
		a := f.enqueue(echoArgs{N: 1}, jobs.Queue(q), jobs.Delay(time.Hour))
		b := f.enqueue(echoArgs{N: 2}, jobs.Queue(q), jobs.Delay(time.Hour))
		var l struct {
			Selection []struct{ Queue, ID string } `json:"selection"`
		}
		getJSON(t, h, "/api/jobs?state=pending&queue="+q+"&select=1", &l)
		if len(l.Selection) != 2 {
			t.Fatalf("%s selection: %+v", action, l.Selection)
		}
		// b starts before the operator confirms.
		cl, err := f.ledger.ClaimJob(ctx, q, b, "w1", time.Minute)
		must(t, err)
		sel, _ := json.Marshal(l.Selection)
		res, body := act(t, h, "/api/bulk", `{"action":"`+action+`","state":"pending","note":"not needed","jobs":`+string(sel)+`}`)
		var br struct {
			Done   int
			Failed []struct{ ID, Code, Error string }
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &br) != nil || br.Done != 1 || len(br.Failed) != 1 ||
			br.Failed[0].ID != b || br.Failed[0].Code != "wrong_state" || !strings.Contains(br.Failed[0].Error, "now running") {
			t.Errorf("bulk %s: %d %s (want a done, b wrong_state)", action, res.StatusCode, body)
		}
		rec, err := f.ledger.Get(ctx, q, b)
		must(t, err)
		if rec.State != jobs.Running || rec.Token != cl.Token || rec.CancelledBy != "" {
			t.Fatalf("bulk %s landed on the running job: %s cancel %q", action, rec.State, rec.CancelledBy)
		}
		want := jobs.Cancelled
		if action == "run_now" {
			want = jobs.Pending
			if r, err := f.ledger.Get(ctx, q, a); err != nil || r.RunAt.After(time.Now().Add(time.Minute)) {
				t.Errorf("a was not made due: %+v, %v", r, err)
			}
		}
		if st := f.state(q, a); st != want {
			t.Errorf("bulk %s: a is %s, want %s", action, st, want)
		}
	}
}
