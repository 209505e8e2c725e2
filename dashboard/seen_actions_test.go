package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// TestActionsKeepToTheRunThePageShowed: a job cancelled and re-run by
// another operator since the page showed it is back in the state and with
// the token shown (never claimed in between): the page's cancel, run-now
// and re-run send the run count it showed too, and are refused (409); the
// page showing the job now acts.
func TestActionsKeepToTheRunThePageShowed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.enqueue(echoArgs{N: 1}, jobs.Queue("later"), jobs.Delay(time.Hour))
	type page struct {
		Job struct {
			State, Token string
			Runs         int
		} `json:"job"`
	}
	var before page
	getJSON(t, h, "/api/jobs/later/"+id, &before)
	_, err := f.client.Cancel(ctx, "later", id, "alice", "withdrawn")
	must(t, err)
	_, err = f.client.Resolve(ctx, "later", id, jobs.DecideRerun, "bob", "asked again")
	must(t, err)
	for _, a := range []string{"cancel", "run-now"} {
		body, _ := json.Marshal(map[string]any{"note": "stale", "state": before.Job.State, "token": before.Job.Token, "runs": before.Job.Runs})
		if res, b := act(t, h, "/api/jobs/later/"+id+"/"+a, string(body)); res.StatusCode != http.StatusConflict || !strings.Contains(string(b), "re-ran it since") {
			t.Errorf("%s on the page shown before the re-run: %d %s (want 409 naming the re-run)", a, res.StatusCode, b)
		}
	}
	var now page
	getJSON(t, h, "/api/jobs/later/"+id, &now)
	body, _ := json.Marshal(map[string]any{"note": "as shown", "state": now.Job.State, "token": now.Job.Token, "runs": now.Job.Runs})
	if res, b := act(t, h, "/api/jobs/later/"+id+"/cancel", string(body)); res.StatusCode != http.StatusOK {
		t.Fatalf("cancel of the job as shown now: %d %s", res.StatusCode, b)
	}
	_, err = f.client.Resolve(ctx, "later", id, jobs.DecideRerun, "carol", "run it")
	must(t, err)
	_, err = f.client.Cancel(ctx, "later", id, "dave", "do not run")
	must(t, err)
	body, _ = json.Marshal(map[string]any{"decision": "rerun", "note": "stale", "state": "cancelled", "token": now.Job.Token, "runs": now.Job.Runs})
	if res, b := act(t, h, "/api/jobs/later/"+id+"/resolve", string(body)); res.StatusCode != http.StatusConflict {
		t.Fatalf("re-run on the page shown before carol's re-run and dave's cancel: %d %s (want 409)", res.StatusCode, b)
	}
	rec, err := f.ledger.Get(ctx, "later", id)
	must(t, err)
	if rec.State != jobs.Cancelled || rec.Reason != "cancelled by operator:dave" {
		t.Fatalf("dave's cancel was overridden: %s (%s)", rec.State, rec.Reason)
	}
	if res, b := act(t, h, "/api/jobs/later/"+id+"/run-now", `{"note":"x","state":"pending","runs":-1}`); res.StatusCode != http.StatusBadRequest {
		t.Errorf("negative runs: %d %s (want 400)", res.StatusCode, b)
	}
}

// failGet fails GET of keys ending in suffix while on.
type failGet struct {
	suffix string
	on     atomic.Bool
}

func (f *failGet) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failGet) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k, ok := cmd.Args()[len(cmd.Args())-1].(string); f.on.Load() && cmd.Name() == "get" && ok && strings.HasSuffix(k, f.suffix) {
			cmd.SetErr(errors.New("dial tcp: connection refused"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (f *failGet) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAPauseThatAppliedIsNotReportedFailed: a pause or resume whose write
// applied is answered as done even when the queue cannot be read back
// afterwards, not with a 503 that would tell the operator nothing
// happened.
func TestAPauseThatAppliedIsNotReportedFailed(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	hook := &failGet{suffix: "paused"}
	f.rdb.AddHook(hook)
	for _, a := range []string{"pause", "resume"} {
		hook.on.Store(true)
		res, b := act(t, h, "/api/queues/ops/"+a, `{"note":"deploy"}`)
		hook.on.Store(false)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"changed":true`) || !strings.Contains(string(b), `"unread":true`) {
			t.Fatalf("%s with the queue unreadable afterwards: %d %s (want 200, changed, unread)", a, res.StatusCode, b)
		}
		p, err := f.insp.Paused(context.Background(), "ops")
		must(t, err)
		if (p != nil) != (a == "pause") {
			t.Fatalf("after the %s: paused %+v", a, p)
		}
	}
}

// TestRunNowInAPausedQueueSaysItWaits: a job made due in a paused queue
// does not start: the answer says who paused the queue, so the page does
// not claim that pools start it at once.
func TestRunNowInAPausedQueueSaysItWaits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.enqueue(echoArgs{N: 1}, jobs.Queue("held"), jobs.Delay(time.Hour))
	_, err := f.client.Pause(ctx, "held", "bob", "incident")
	must(t, err)
	var out struct {
		Job         struct{ State string }
		QueuePaused *jobs.Pause `json:"queue_paused"`
	}
	res, b := act(t, h, "/api/jobs/held/"+id+"/run-now", `{"note":"customer waiting"}`)
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.QueuePaused == nil || out.QueuePaused.Actor != "operator:bob" {
		t.Fatalf("run now in a paused queue: %d %s (want the pause named)", res.StatusCode, b)
	}
	_, err = f.client.Resume(ctx, "held", "bob", "")
	must(t, err)
	out.QueuePaused = nil
	other := f.enqueue(echoArgs{N: 2}, jobs.Queue("held"), jobs.Delay(time.Hour))
	res, b = act(t, h, "/api/jobs/held/"+other+"/run-now", `{"note":"again"}`)
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.QueuePaused != nil {
		t.Fatalf("run now in a running queue: %d %s (want no pause)", res.StatusCode, b)
	}
}

// blockScript holds the script call that names job id until its context
// ends, as a Redis too slow for the action's time would.
type blockScript struct{ id string }

func (b *blockScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *blockScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if (strings.HasPrefix(cmd.Name(), "eval") || strings.HasPrefix(cmd.Name(), "fcall")) && strings.Contains(fmt.Sprint(cmd.Args()), b.id) {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (b *blockScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBulkActionOutOfTimeSaysWhatWasNotTried: a bulk action whose time
// (Options.Timeout) runs out part-way reports the jobs it did not get to
// as not attempted, left as they were, rather than as jobs the ledger
// could not be reached for, and logs that once rather than once a job.
func TestBulkActionOutOfTimeSaysWhatWasNotTried(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass, Timeout: 200 * time.Millisecond})
	var refs []map[string]string
	for i := range 20 {
		id := f.enqueue(echoArgs{N: i}, jobs.Queue("slow-bulk"), jobs.Delay(time.Hour))
		refs = append(refs, map[string]string{"queue": "slow-bulk", "id": id})
	}
	f.rdb.AddHook(&blockScript{id: refs[5]["id"]})
	sel, _ := json.Marshal(refs)
	res, body := act(t, h, "/api/bulk", `{"action":"cancel","state":"pending","note":"x","jobs":`+string(sel)+`}`)
	var br struct {
		Done   int
		Failed []struct{ ID, Code, Error string }
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &br) != nil || br.Done != 5 || len(br.Failed) != 15 {
		t.Fatalf("bulk: %d %s (want 5 done, 15 failed)", res.StatusCode, body)
	}
	for i, fl := range br.Failed[1:] {
		if fl.ID != refs[6+i]["id"] || fl.Code != "unavailable" || !strings.Contains(fl.Error, "not attempted") {
			t.Fatalf("job %d: %+v (want not attempted)", 6+i, fl)
		}
		if st := f.state("slow-bulk", fl.ID); st != jobs.Pending {
			t.Fatalf("job %d not attempted is %s", 6+i, st)
		}
	}
	if n := strings.Count(f.logs.String(), "bulk action failed on a job"); n > 1 {
		t.Fatalf("%d log lines for the jobs not attempted, want at most the one that ran out of time:\n%s", n, f.logs.String())
	}
}

// TestSeenRunsRefusedForWhatIsWrong: a negative run count is refused
// (400) naming the run count, whether or not a state was sent, not as a
// missing state; nothing is done.
func TestSeenRunsRefusedForWhatIsWrong(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.deadJob("default", "op-dead")
	for _, body := range []string{
		`{"decision":"rerun","note":"x","runs":-1}`,
		`{"decision":"rerun","note":"x","state":"dead","runs":-1}`,
	} {
		res, b := act(t, h, "/api/jobs/default/"+id+"/resolve", body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "runs must be") {
			t.Errorf("%s: %d %s (want 400 naming runs)", body, res.StatusCode, b)
		}
	}
	if st := f.state("default", id); st != jobs.Dead {
		t.Fatalf("job %s after refused decisions", st)
	}
}
