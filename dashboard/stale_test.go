package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestResolveIsFencedByWhatThePageShowed: a decision is made on the
// attempt the page showed. When the job moved on before the click (it was
// re-run and a new attempt ended uncertain in turn), the decision must not
// land on the new attempt, whose effect the operator never looked at.
func TestResolveIsFencedByWhatThePageShowed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	id := f.enqueue(chargeArgs{Account: "acct-9", Card: secret}, jobs.Queue("pay"), jobs.OperationID("op-pay-9"))
	uncertain := func() string {
		cl := f.claimOne("pay", id, "w1", time.Minute)
		cs, err := f.ledger.Complete(ctx, "pay", []ledger.Completion{{ID: id, Token: cl.Token,
			Outcome: ledger.Outcome{To: jobs.Uncertain, Error: "timeout after send", Reason: "deadline passed mid-call"}}})
		must(t, err)
		if !cs[0].Applied {
			t.Fatalf("commit: %+v", cs[0])
		}
		return cl.Token.String()
	}
	first := uncertain()

	// The operator opens the job page: attempt `first`, uncertain.
	var page struct {
		Job struct{ State, Token string } `json:"job"`
	}
	getJSON(t, h, "/api/jobs/pay/"+id, &page)
	if page.Job.State != "uncertain" || page.Job.Token != first {
		t.Fatalf("page: %+v", page.Job)
	}
	// Meanwhile the reconciler re-runs it and the new attempt ends uncertain.
	_, err := f.ledger.Decide(ctx, "pay", id, ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideRerun,
		Actor: "reconciler:p1", Note: "not applied"})
	must(t, err)
	second := uncertain()

	// The operator, having checked the first attempt's effect, clicks
	// Re-run: the page sends what it showed.
	body, _ := json.Marshal(map[string]string{"decision": "rerun", "note": "attempt 1 never reached the gateway",
		"state": page.Job.State, "token": page.Job.Token})
	res, b := act(t, h, "/api/jobs/pay/"+id+"/resolve", string(body))
	if res.StatusCode != http.StatusConflict || !strings.Contains(string(b), `"code":"wrong_state"`) {
		t.Errorf("stale decision: %d %s (want 409 wrong_state)", res.StatusCode, b)
	}
	rec, err := f.ledger.Get(ctx, "pay", id)
	must(t, err)
	if rec.State != jobs.Uncertain || rec.Token.String() != second {
		t.Fatalf("the decision about attempt %s landed on attempt %s: job is %s", first, second, rec.State)
	}

	// The same decision on what the page shows now (run 1: the
	// reconciler's re-run) applies.
	var now struct {
		Job struct {
			State, Token string
			Runs         int
		} `json:"job"`
	}
	getJSON(t, h, "/api/jobs/pay/"+id, &now)
	if now.Job.State != "uncertain" || now.Job.Token != second || now.Job.Runs != 1 {
		t.Fatalf("page now: %+v", now.Job)
	}
	body, _ = json.Marshal(map[string]any{"decision": "rerun", "note": "checked attempt 2 too",
		"state": now.Job.State, "token": now.Job.Token, "runs": now.Job.Runs})
	if res, b := act(t, h, "/api/jobs/pay/"+id+"/resolve", string(body)); res.StatusCode != http.StatusOK {
		t.Fatalf("current decision: %d %s", res.StatusCode, b)
	}
	if st := f.state("pay", id); st != jobs.Pending {
		t.Fatalf("after the re-run: %s", st)
	}
	// The state seen is checked too (a dead job re-run since, then
	// cancelled before it ran, keeps its token).
	dead := f.deadJob("refunds", "op-refund-dead")
	getJSON(t, h, "/api/jobs/refunds/"+dead, &page)
	_, err = f.client.Resolve(ctx, "refunds", dead, jobs.DecideRerun, "alice", "retry")
	must(t, err)
	_, err = f.client.Cancel(ctx, "refunds", dead, "bob", "not now")
	must(t, err)
	body, _ = json.Marshal(map[string]string{"decision": "rerun", "note": "retry", "state": page.Job.State, "token": page.Job.Token})
	if res, b := act(t, h, "/api/jobs/refunds/"+dead+"/resolve", string(body)); res.StatusCode != http.StatusConflict {
		t.Errorf("re-run of a dead job since cancelled: %d %s (want 409)", res.StatusCode, b)
	}
	if st := f.state("refunds", dead); st != jobs.Cancelled {
		t.Fatalf("bob's cancel was overridden: %s", st)
	}
	// A job never claimed has no token: the page shows "" and sends it.
	never := f.enqueue(echoArgs{N: 9}, jobs.Queue("refunds"), jobs.Delay(time.Hour))
	_, err = f.client.Cancel(ctx, "refunds", never, "bob", "not now")
	must(t, err)
	getJSON(t, h, "/api/jobs/refunds/"+never, &page)
	body, _ = json.Marshal(map[string]string{"decision": "rerun", "note": "after all", "state": page.Job.State, "token": page.Job.Token})
	if res, b := act(t, h, "/api/jobs/refunds/"+never+"/resolve", string(body)); res.StatusCode != http.StatusOK || page.Job.Token != "" {
		t.Errorf("re-run of a cancelled job never claimed (token %q): %d %s", page.Job.Token, res.StatusCode, b)
	}
	// A bad state or token is refused before anything is done.
	for _, bad := range []string{
		`{"decision":"rerun","state":"sleeping","token":"1"}`,
		`{"decision":"rerun","state":"cancelled","token":"x"}`,
		`{"decision":"rerun","state":"cancelled","token":"-1"}`,
	} {
		if res, b := act(t, h, "/api/jobs/refunds/"+dead+"/resolve", bad); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s (want 400)", bad, res.StatusCode, b)
		}
	}
}

// TestBrowserConfirmationSurvivesRefresh: the overview refreshes itself
// every 5 s; an operator who opened a queue's Pause and is typing the
// (required) note must not lose the confirmation, nor the note, to it.
func TestBrowserConfirmationSurvivesRefresh(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	srv := f.serveOps()
	tb, watch := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/"))
	pause := `#queues .action[data-action="pause"][data-target="default"]`
	waitJS(t, tb, "the pause button", `!!document.querySelector(`+jsString(pause+` button.act`)+`)`)
	click(t, tb, pause+` button.act`)
	note := pause + ` .confirm-box input.note`
	waitJS(t, tb, "the confirmation", `!!document.querySelector(`+jsString(note)+`)`)
	must(t, tb.page.Type(tb.ctx, note, "deploying the "))
	time.Sleep(6500 * time.Millisecond) // past the overview's 5 s refresh
	if !evalJS[bool](t, tb, `!!document.querySelector(`+jsString(note)+`) && document.querySelector(`+jsString(note)+`).value === "deploying the "`) {
		t.Fatalf("the refresh threw the open confirmation away: %.2000s", evalJS[string](t, tb, `document.getElementById('queues').outerHTML`))
	}
	must(t, tb.page.Type(tb.ctx, note, "gateway"))
	click(t, tb, pause+` .confirm-box button.confirm`)
	redistest.Await(t, f.rdb, f.ns, "queue default paused", func() bool {
		p, err := f.ledger.Paused(context.Background(), "default")
		return err == nil && p != nil && p.Note == "deploying the gateway"
	})
	// The page shows the result and refreshes itself again.
	waitJS(t, tb, "the paused badge", `!!document.querySelector('#queues [data-paused="default"]')`)
	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}

// TestBulkRerunKeepsToTheSelectedState: a bulk re-run confirmed over the
// dead jobs of a filter must not re-run a job that moved on to uncertain
// meanwhile (re-run by someone else, its new attempt's outcome unknown):
// uncertain exists so that such a job is not run again blindly.
func TestBulkRerunKeepsToTheSelectedState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	a, b := f.deadJob("bulk", "op-bulk-a"), f.deadJob("other", "op-bulk-b")
	var l struct {
		Selection []struct{ Queue, ID string } `json:"selection"`
	}
	getJSON(t, h, "/api/jobs?state=dead&select=1", &l)
	if len(l.Selection) != 2 {
		t.Fatalf("selection: %+v", l.Selection)
	}
	// Another operator re-runs b; its new attempt ends uncertain.
	_, err := f.client.Resolve(ctx, "other", b, jobs.DecideRerun, "alice", "retry")
	must(t, err)
	cl := f.claimOne("other", b, "w2", time.Minute)
	cs, err := f.ledger.Complete(ctx, "other", []ledger.Completion{{ID: b, Token: cl.Token,
		Outcome: ledger.Outcome{To: jobs.Uncertain, Error: "timeout after send", Reason: "deadline passed mid-call"}}})
	must(t, err)
	if !cs[0].Applied {
		t.Fatalf("commit: %+v", cs[0])
	}
	sel, _ := json.Marshal(l.Selection)
	res, body := act(t, h, "/api/bulk", `{"action":"rerun","state":"dead","note":"gateway fixed","jobs":`+string(sel)+`}`)
	var br struct {
		Done   int
		Failed []struct{ ID, Code string }
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &br) != nil || br.Done != 1 || len(br.Failed) != 1 ||
		br.Failed[0].ID != b || br.Failed[0].Code != "wrong_state" {
		t.Errorf("bulk re-run: %d %s (want a done, b wrong_state)", res.StatusCode, body)
	}
	if st := f.state("bulk", a); st != jobs.Pending {
		t.Errorf("a: %s", st)
	}
	if st := f.state("other", b); st != jobs.Uncertain {
		t.Fatalf("the uncertain job was re-run blindly: %s", st)
	}
	if res, body := act(t, h, "/api/bulk", `{"action":"rerun","state":"nope","note":"x","jobs":`+string(sel)+`}`); res.StatusCode != http.StatusBadRequest {
		t.Errorf("bad state: %d %s", res.StatusCode, body)
	}
}

// TestRunNowNeverDelays: "Run now" (alone or over every pending job of a
// filter, due ones included) must not push a job that is already due
// behind the jobs that became due after it: it is refused as already due,
// and keeps its place.
func TestRunNowNeverDelays(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	first := f.enqueue(echoArgs{N: 1}, jobs.Queue("backlog"))
	time.Sleep(5 * time.Millisecond) // due a few ms apart by Redis's clock
	second := f.enqueue(echoArgs{N: 2}, jobs.Queue("backlog"))
	time.Sleep(5 * time.Millisecond)
	before, err := f.ledger.Get(ctx, "backlog", first)
	must(t, err)
	body, _ := json.Marshal(map[string]any{"action": "run_now", "note": "customers waiting",
		"jobs": []map[string]string{{"queue": "backlog", "id": first}}})
	if res, b := act(t, h, "/api/bulk", string(body)); res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"done":0`) ||
		!strings.Contains(string(b), "already due") {
		t.Fatalf("bulk run now of a due job: %d %s (want it listed as already due)", res.StatusCode, b)
	}
	after, err := f.ledger.Get(ctx, "backlog", first)
	must(t, err)
	if after.RunAt.After(before.RunAt) {
		t.Errorf("run now moved a due job from %v to %v", before.RunAt, after.RunAt)
	}
	if cl := f.claimOne("backlog", first, "w1", time.Minute); cl.ID != first {
		t.Fatalf("claimed %s first; %s was due before it", cl.ID, first)
	}
	_ = second
}

// TestListTimeBoundsPastYear9999: a from or to in unix milliseconds past
// what a time can be shown as (year 9999) is a bad request, said clearly,
// not a 500 from the encoder.
func TestListTimeBoundsPastYear9999(t *testing.T) {
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1})
	h := f.handler(dashboard.Options{})
	for _, q := range []string{"from=253402300800000", "to=99999999999999999", "from=1&to=9999999999999999"} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, "/api/jobs?state=pending&"+q, nil))
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid"`) {
			t.Errorf("%s: %d %s (want 400 invalid)", q, res.StatusCode, body)
		}
	}
	// The last millisecond of year 9999 is a time like any other.
	var l struct{ Total int }
	getJSON(t, h, "/api/jobs?state=pending&to=253402300799999", &l)
	if l.Total != 1 {
		t.Errorf("total %d, want 1", l.Total)
	}
}
