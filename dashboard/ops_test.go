package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type (
	pageJSON struct {
		Total      int  `json:"total"`
		TotalExact bool `json:"total_exact"`
		Limit      int  `json:"limit"`
		Jobs       []struct {
			ID          string          `json:"id"`
			Queue       string          `json:"queue"`
			Kind        string          `json:"kind"`
			OperationID string          `json:"operation_id"`
			Args        json.RawMessage `json:"args"`
			ArgsPreview string          `json:"args_preview"`
			ArgsSize    int             `json:"args_size"`
			IndexAt     time.Time       `json:"index_at"`
		} `json:"jobs"`
		Selection []struct {
			Queue string `json:"queue"`
			ID    string `json:"id"`
		} `json:"selection"`
		SelectionTruncated bool `json:"selection_truncated"`
	}
	matchesJSON struct {
		Partial bool `json:"partial"`
		Matches []struct {
			By  string `json:"by"`
			Job struct {
				ID          string `json:"id"`
				OperationID string `json:"operation_id"`
			} `json:"job"`
		} `json:"matches"`
	}
)

func (p pageJSON) ids() []string {
	var out []string
	for _, j := range p.Jobs {
		out = append(out, j.ID)
	}
	return out
}

// TestListsCarryPreviewsNotPayloads: a list of jobs with 1 MiB args stays
// small (a preview and the size per job), limit is capped, and the job's
// own page has the whole args.
func TestListsCarryPreviewsNotPayloads(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("é", (1<<20-1024)/2) // about 1 MiB (the largest args) of two-byte runes
	var ids []string
	for i := range 5 {
		ids = append(ids, f.enqueue(echoArgs{N: i, Note: big, Secret: secret}, jobs.Queue("big"), jobs.Delay(time.Hour)))
	}
	h := f.handler(dashboard.Options{})
	var l pageJSON
	body := getJSON(t, h, "/api/jobs?state=pending&queue=big&limit=200", &l)
	if len(body) > 5*2048 {
		t.Fatalf("a list of 5 jobs is %d bytes", len(body))
	}
	if l.Limit != 200 || l.Total != 5 || len(l.Jobs) != 5 {
		t.Fatalf("limit %d (want 200), total %d, %d jobs", l.Limit, l.Total, len(l.Jobs))
	}
	for _, j := range l.Jobs {
		if j.Args != nil || j.ArgsSize < 1<<20-1024 || len(j.ArgsPreview) > 256+len("…") || !strings.HasPrefix(j.ArgsPreview, `{"n":`) {
			t.Fatalf("list entry: args %d bytes, size %d, preview %q", len(j.Args), j.ArgsSize, j.ArgsPreview)
		}
		if strings.Contains(j.ArgsPreview, "\ufffd") {
			t.Fatal("the preview cut a rune")
		}
	}
	// Search results are lists too.
	var m struct {
		Matches []struct {
			Job struct {
				Args     json.RawMessage `json:"args"`
				ArgsSize int             `json:"args_size"`
			} `json:"job"`
		} `json:"matches"`
	}
	body = getJSON(t, h, "/api/search?q="+ids[0], &m)
	if len(body) > 4096 || len(m.Matches) == 0 || m.Matches[0].Job.Args != nil || m.Matches[0].Job.ArgsSize < 1<<20-1024 {
		t.Fatalf("search: %d bytes", len(body))
	}
	var d detailJSON
	getJSON(t, h, "/api/jobs/big/"+ids[0], &d)
	var args echoArgs
	must(t, json.Unmarshal(d.Job.Args, &args))
	if args.Note != big || args.Secret != jobs.Redacted {
		t.Fatalf("job page args: %d bytes of note, secret %q", len(args.Note), args.Secret)
	}
}

// TestListFiltersSortAndPages: kind, queue and time filters, both orders,
// and pages that together are the whole ordered list.
func TestListFiltersSortAndPages(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	// Pending jobs are indexed by due time: job i of queue a is due in i
	// hours; charges interleave; queue b holds echoes due in i+0.5 hours.
	var echoA, echoB []string
	for i := 1; i <= 6; i++ {
		echoA = append(echoA, f.enqueue(echoArgs{N: i}, jobs.Queue("a"), jobs.Delay(time.Duration(i)*time.Hour)))
		f.enqueue(chargeArgs{Account: "x"}, jobs.Queue("a"), jobs.Delay(time.Duration(i)*time.Hour+time.Minute))
		echoB = append(echoB, f.enqueue(echoArgs{N: i}, jobs.Queue("b"), jobs.Delay(time.Duration(i)*time.Hour+30*time.Minute)))
	}
	var l pageJSON
	getJSON(t, h, "/api/jobs?state=pending&queue=a&kind=echo", &l)
	if l.Total != 6 || !l.TotalExact || !slices.Equal(l.ids(), echoA) {
		t.Fatalf("kind filter: total %d, %v", l.Total, l.ids())
	}
	getJSON(t, h, "/api/jobs?state=pending&queue=a&kind=echo&sort=desc", &l)
	rev := slices.Clone(echoA)
	slices.Reverse(rev)
	if !slices.Equal(l.ids(), rev) {
		t.Fatalf("newest first: %v", l.ids())
	}
	for i := 1; i < len(l.Jobs); i++ {
		if l.Jobs[i].IndexAt.After(l.Jobs[i-1].IndexAt) {
			t.Fatal("desc is not descending by index time")
		}
	}
	// Across queues, merged by time: a1 b1 a2 b2 ...
	var merged []string
	for i := range echoA {
		merged = append(merged, echoA[i], echoB[i])
	}
	getJSON(t, h, "/api/jobs?state=pending&kind=echo", &l)
	if l.Total != 12 || !slices.Equal(l.ids(), merged) {
		t.Fatalf("across queues: total %d, %v", l.Total, l.ids())
	}
	// Pages of 5, newest first, make up the whole list.
	var paged []string
	for off := 0; off < 12; off += 5 {
		getJSON(t, h, fmt.Sprintf("/api/jobs?state=pending&kind=echo&sort=desc&limit=5&offset=%d", off), &l)
		paged = append(paged, l.ids()...)
	}
	rev = slices.Clone(merged)
	slices.Reverse(rev)
	if !slices.Equal(paged, rev) {
		t.Fatalf("pages: %v", paged)
	}
	// A time range on the index: due between 2h and 4h15m from now.
	now := time.Now()
	from, to := now.Add(2*time.Hour-time.Minute).UTC().Format(time.RFC3339), now.Add(4*time.Hour+15*time.Minute).UnixMilli()
	getJSON(t, h, fmt.Sprintf("/api/jobs?state=pending&queue=a&from=%s&to=%d", from, to), &l)
	if l.Total != 6 || len(l.Jobs) != 6 || l.Jobs[0].ID != echoA[1] || l.Jobs[5].Kind != "charge" {
		t.Fatalf("time range: total %d, %v", l.Total, l.ids())
	}
	// The selection for a bulk action lists every match.
	getJSON(t, h, "/api/jobs?state=pending&kind=charge&limit=1&select=1", &l)
	if l.Total != 6 || len(l.Jobs) != 1 || len(l.Selection) != 6 || l.SelectionTruncated {
		t.Fatalf("selection: total %d, %d jobs, %d selected", l.Total, len(l.Jobs), len(l.Selection))
	}
}

// TestSearchByOperationIDPrefix: exact ids first, then job ids and
// operation ids starting with the text; glob characters are literal.
func TestSearchByOperationIDPrefix(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	a := f.enqueue(echoArgs{N: 1}, jobs.OperationID("order-123-a"), jobs.Delay(time.Hour))
	b := f.enqueue(echoArgs{N: 2}, jobs.OperationID("order-123-b"), jobs.Queue("other"), jobs.Delay(time.Hour))
	f.enqueue(echoArgs{N: 3}, jobs.OperationID("order-999"), jobs.Delay(time.Hour))
	plain := f.enqueue(echoArgs{N: 4}, jobs.Delay(time.Hour)) // its operation id is its id

	var m matchesJSON
	getJSON(t, h, "/api/search?q=order-123", &m)
	var got []string
	for _, x := range m.Matches {
		if x.By != "operation_id_prefix" {
			t.Errorf("matched by %s", x.By)
		}
		got = append(got, x.Job.ID)
	}
	slices.Sort(got)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(got, want) || m.Partial {
		t.Fatalf("prefix order-123: %v (want %v), partial %v", got, want, m.Partial)
	}
	getJSON(t, h, "/api/search?q=order-123-a", &m)
	if len(m.Matches) != 1 || m.Matches[0].By != "operation_id" || m.Matches[0].Job.ID != a {
		t.Fatalf("exact operation id: %+v", m.Matches)
	}
	getJSON(t, h, "/api/search?q="+plain[:13], &m)
	if len(m.Matches) != 1 || m.Matches[0].Job.ID != plain || m.Matches[0].By != "job_id_prefix" {
		t.Fatalf("job id prefix: %+v", m.Matches)
	}
	for _, q := range []string{"order-%2A", "order-1%3F3", "%5Bo%5Drder"} {
		getJSON(t, h, "/api/search?q="+q, &m)
		if len(m.Matches) != 0 {
			t.Fatalf("%s matched as a glob: %+v", q, m.Matches)
		}
	}
	getJSON(t, h, "/api/search?q=order&prefix=0", &m)
	if len(m.Matches) != 0 {
		t.Fatalf("prefix=0 still searched prefixes: %+v", m.Matches)
	}
}

// act sends an authenticated action with a valid CSRF token.
func act(t *testing.T, h http.Handler, path, body string) (*http.Response, []byte) {
	t.Helper()
	tok, c := csrf(t, h)
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.SetBasicAuth(user, pass)
	r.AddCookie(c)
	r.Header.Set("X-CSRF-Token", tok)
	return call(t, h, r)
}

// TestActions: cancel, pause, resume, re-run and bulk actions need
// credentials and the CSRF token, record the actor and the note, and
// answer wrong states with 409.
func TestActions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	ro := f.handler(dashboard.Options{})
	sched := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))

	// Refusals: read-only, no credentials, no CSRF token, no note.
	path := "/api/jobs/default/" + sched + "/cancel"
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"note":"x"}`))
	r.Header.Set("Content-Type", "application/json")
	if res, body := call(t, ro, r); res.StatusCode != http.StatusForbidden {
		t.Fatalf("read-only cancel: %d %s", res.StatusCode, body)
	}
	r = httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"note":"x"}`))
	r.Header.Set("Content-Type", "application/json")
	if res, body := call(t, h, r); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("cancel without credentials: %d %s", res.StatusCode, body)
	}
	r = httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"note":"x"}`))
	r.Header.Set("Content-Type", "application/json")
	r.SetBasicAuth(user, pass)
	if res, body := call(t, h, r); res.StatusCode != http.StatusForbidden || errCode(t, body) != "csrf" {
		t.Fatalf("cancel without a CSRF token: %d %s", res.StatusCode, body)
	}
	if res, body := act(t, h, path, `{"note":"  "}`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("cancel without a note: %d %s", res.StatusCode, body)
	}
	if res, body := act(t, h, path, `{"note":"x","extra":1}`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("cancel with an unknown field: %d %s", res.StatusCode, body)
	}
	if f.state("default", sched) != jobs.Pending {
		t.Fatal("a refused cancel changed the job")
	}

	// Cancel a scheduled job; a second cancel is a wrong state.
	if res, body := act(t, h, path, `{"note":"customer withdrew"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.StatusCode, body)
	}
	hist, err := f.ledger.History(ctx, "default", sched)
	must(t, err)
	if last := hist[len(hist)-1]; f.state("default", sched) != jobs.Cancelled || last.Event != "cancel" ||
		last.Actor != "operator:"+user || last.Note != "customer withdrew" {
		t.Fatalf("cancelled job: %s, %+v", f.state("default", sched), last)
	}
	if res, body := act(t, h, path, `{"note":"again"}`); res.StatusCode != http.StatusConflict {
		t.Fatalf("second cancel: %d %s", res.StatusCode, body)
	}
	// Run a scheduled job now; a job that is not pending is a wrong state.
	later := f.enqueue(echoArgs{N: 2}, jobs.Delay(time.Hour))
	if res, body := act(t, h, "/api/jobs/default/"+later+"/run-now", `{"note":"customer waiting"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("run now: %d %s", res.StatusCode, body)
	}
	rec, err := f.ledger.Get(ctx, "default", later)
	must(t, err)
	if rec.State != jobs.Pending || rec.RunAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after run now: %+v", rec)
	}
	if e := lastEntry(t, f, "default", later); e.Event != "run_now" || e.Actor != "operator:"+user || e.Note != "customer waiting" {
		t.Fatalf("run-now entry: %+v", e)
	}
	if res, body := act(t, h, "/api/jobs/default/"+sched+"/run-now", `{}`); res.StatusCode != http.StatusConflict {
		t.Fatalf("run now of a cancelled job: %d %s", res.StatusCode, body)
	}
	// Re-run the cancelled job.
	if res, body := act(t, h, "/api/jobs/default/"+sched+"/resolve", `{"decision":"rerun","note":"customer came back"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("rerun: %d %s", res.StatusCode, body)
	}
	if f.state("default", sched) != jobs.Pending {
		t.Fatal("the re-run job is not pending")
	}

	// Pause and resume a queue.
	if res, body := act(t, h, "/api/queues/default/pause", `{}`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("pause without a note: %d %s", res.StatusCode, body)
	}
	if res, body := act(t, h, "/api/queues/default/pause", `{"note":"gateway maintenance"}`); res.StatusCode != http.StatusOK ||
		!strings.Contains(string(body), `"changed":true`) {
		t.Fatalf("pause: %d %s", res.StatusCode, body)
	}
	p, err := f.ledger.Paused(ctx, "default")
	must(t, err)
	if p == nil || p.Actor != "operator:"+user || p.Note != "gateway maintenance" {
		t.Fatalf("paused: %+v", p)
	}
	// A resume naming another pause than the queue's (the page showed an
	// earlier one) leaves it paused.
	if res, body := act(t, h, "/api/queues/default/resume", `{"pause_id":"an-earlier-pause"}`); res.StatusCode != http.StatusConflict ||
		!strings.Contains(string(body), "wrong_state") {
		t.Fatalf("resume of another pause: %d %s, want 409", res.StatusCode, body)
	}
	if p2, err := f.ledger.Paused(ctx, "default"); err != nil || p2 == nil || p2.ID != p.ID {
		t.Fatalf("after a resume of another pause: %+v %v, want %+v", p2, err, p)
	}
	if res, body := act(t, h, "/api/queues/default/resume", `{"pause_id":"`+p.ID+`"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d %s", res.StatusCode, body)
	}
	if p, err := f.ledger.Paused(ctx, "default"); err != nil || p != nil {
		t.Fatalf("still paused: %+v %v", p, err)
	}
	if res, body := act(t, h, "/api/queues/bad%20queue/pause", `{"note":"x"}`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("pause of a bad queue name: %d %s", res.StatusCode, body)
	}

	// Bulk: select the dead jobs of queue "bulk", re-run them all.
	var dead []string
	for i := range 3 {
		dead = append(dead, f.deadJob("bulk", fmt.Sprintf("op-dead-%d", i)))
	}
	var l pageJSON
	getJSON(t, h, "/api/jobs?state=dead&queue=bulk&select=1", &l)
	if len(l.Selection) != 3 {
		t.Fatalf("selection: %+v", l.Selection)
	}
	sel, _ := json.Marshal(l.Selection)
	res, body := act(t, h, "/api/bulk", `{"action":"rerun","note":"fixed the card gateway","jobs":`+string(sel)+`}`)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"requested":3,"done":3,"failed":[]`) {
		t.Fatalf("bulk rerun: %d %s", res.StatusCode, body)
	}
	for _, id := range dead {
		if f.state("bulk", id) != jobs.Pending {
			t.Fatalf("job %s was not re-run", id)
		}
		hist, err := f.ledger.History(ctx, "bulk", id)
		must(t, err)
		if last := hist[len(hist)-1]; last.Actor != "operator:"+user || last.Note != "fixed the card gateway" {
			t.Fatalf("history: %+v", last)
		}
	}
	// Bulk run-now of scheduled jobs.
	for i := range 3 {
		f.enqueue(echoArgs{N: 10 + i}, jobs.Queue("later"), jobs.Delay(time.Hour))
	}
	var due struct {
		Selection []struct{ Queue, ID string } `json:"selection"`
	}
	getJSON(t, h, "/api/jobs?state=pending&queue=later&select=1", &due)
	dueSel, _ := json.Marshal(due.Selection)
	if len(due.Selection) != 3 {
		t.Fatalf("selection of scheduled jobs: %+v", due.Selection)
	}
	if res, body := act(t, h, "/api/bulk", `{"action":"run_now","note":"customers waiting","jobs":`+string(dueSel)+`}`); res.StatusCode != http.StatusOK ||
		!strings.Contains(string(body), `"done":3`) {
		t.Fatalf("bulk run now: %d %s", res.StatusCode, body)
	}
	for _, j := range due.Selection {
		rec, err := f.ledger.Get(ctx, "later", j.ID)
		must(t, err)
		if rec.RunAt.After(time.Now().Add(time.Minute)) {
			t.Fatalf("job %s still scheduled at %v after a bulk run-now", j.ID, rec.RunAt)
		}
	}
	// Bulk cancel where one job moved on since it was selected.
	cancelled, err := f.client.Cancel(ctx, "bulk", dead[0], "t", "x")
	must(t, err)
	if cancelled.State != jobs.Cancelled {
		t.Fatal(cancelled.State)
	}
	res, body = act(t, h, "/api/bulk", `{"action":"cancel","note":"duplicate batch","jobs":`+string(sel)+`}`)
	var br struct {
		Requested, Done int
		Failed          []struct{ ID, Code string }
	}
	must(t, json.Unmarshal(body, &br))
	if res.StatusCode != http.StatusOK || br.Requested != 3 || br.Done != 2 || len(br.Failed) != 1 ||
		br.Failed[0].ID != dead[0] || br.Failed[0].Code != "wrong_state" {
		t.Fatalf("bulk cancel: %d %s", res.StatusCode, body)
	}
	for _, bad := range []string{
		`{"action":"delete","note":"x","jobs":[{"queue":"bulk","id":"x"}]}`,
		`{"action":"cancel","note":"x","jobs":[]}`,
		`{"action":"cancel","jobs":[{"queue":"bulk","id":"x"}]}`,
		`{"action":"cancel","note":"x","jobs":[{"queue":"bad queue","id":"x"}]}`,
	} {
		if res, body := act(t, h, "/api/bulk", bad); res.StatusCode != http.StatusBadRequest {
			t.Errorf("bulk %s: %d %s", bad, res.StatusCode, body)
		}
	}
	many := make([]map[string]string, 1001)
	for i := range many {
		many[i] = map[string]string{"queue": "bulk", "id": fmt.Sprint(i)}
	}
	b, _ := json.Marshal(map[string]any{"action": "cancel", "note": "x", "jobs": many})
	if res, body := act(t, h, "/api/bulk", string(b)); res.StatusCode != http.StatusBadRequest {
		t.Errorf("bulk of 1001: %d %s", res.StatusCode, body)
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"action":"cancel","actor":"`+user+`","requested":3,"done":2,"failed":1`) {
		t.Errorf("bulk action not logged: %s", logs)
	}
}

// TestPoolsPage: every live pool, with the maintenance leader marked.
func TestPoolsPage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	for _, id := range []string{"pool-a", "pool-b"} {
		must(t, f.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: id, Host: "host-" + id, PID: 7, Queues: map[string]int{"default": 1},
			Concurrency: 8, Busy: 3, Version: "v-test", Started: time.Now()}, time.Minute))
	}
	_, err := lease.NewManager(f.rdb, lease.Config{Namespace: f.ns}).Acquire(ctx, ledger.LeaderResource, "pool-b", time.Minute)
	must(t, err)
	var out struct {
		Pools []struct {
			ID, Host, Version string
			Concurrency, Busy int
			Queues            map[string]int
			Leader            bool
			LastHeartbeat     time.Time `json:"last_heartbeat"`
			HeartbeatAgeMS    *int64    `json:"heartbeat_age_ms"`
		} `json:"pools"`
		Maintenance struct{ Leader string } `json:"maintenance"`
	}
	getJSON(t, h, "/api/pools", &out)
	if len(out.Pools) != 2 || out.Maintenance.Leader != "pool-b" {
		t.Fatalf("pools: %+v", out)
	}
	for _, p := range out.Pools {
		if p.Host != "host-"+p.ID || p.Concurrency != 8 || p.Busy != 3 || p.Version != "v-test" || p.Queues["default"] != 1 ||
			p.LastHeartbeat.IsZero() || p.HeartbeatAgeMS == nil || p.Leader != (p.ID == "pool-b") {
			t.Errorf("pool: %+v", p)
		}
	}
	must(t, f.ledger.Leave(ctx, "pool-a"))
	getJSON(t, h, "/api/pools", &out)
	if len(out.Pools) != 1 || out.Pools[0].ID != "pool-b" {
		t.Fatalf("after pool-a left: %+v", out.Pools)
	}
}

type seriesJSON struct {
	Window      string `json:"window"`
	StepSeconds int    `json:"step_seconds"`
	Points      []struct {
		At                                               time.Time
		Succeeded, Attempted, Enqueued, Failed           int
		Fenced, Deduplicated, Uncertain, Review, Pending int
		UncertainStarted                                 int `json:"uncertain_started"`
		ReviewStarted                                    int `json:"review_started"`
	} `json:"points"`
	Now map[string]int `json:"now"`
}

// sum adds up the points' counts.
func (s seriesJSON) sum() (out struct{ succeeded, attempted, enqueued, failed, deduplicated, uncertain, review int }) {
	for _, p := range s.Points {
		out.succeeded += p.Succeeded
		out.attempted += p.Attempted
		out.enqueued += p.Enqueued
		out.failed += p.Failed
		out.deduplicated += p.Deduplicated
		out.uncertain += p.UncertainStarted
		out.review += p.ReviewStarted
	}
	return out
}

// TestSeriesCharts: the history endpoint sums the exact per-minute counts
// the scripts keep (no maintenance leader runs here) into steps, per queue
// and across queues, with the state counts of the leader's snapshots where
// there are some and the state counts now.
func TestSeriesCharts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	f.enqueue(echoArgs{N: 1}, jobs.Queue("other"), jobs.Delay(time.Hour))
	// Two dead jobs, one job uncertain then sent to review, one more
	// enqueue deduplicated.
	f.deadJob("default", "op-d1")
	f.deadJob("default", "op-d2")
	f.reviewJob("other", chargeArgs{Account: "a"}, "op-r1")
	_, err := f.client.Enqueue(ctx, brokenArgs{Why: "x"}, jobs.OperationID("op-d1"))
	must(t, err)

	var s seriesJSON
	getJSON(t, h, "/api/series?window=1h", &s)
	if s.Window != "1h" || s.StepSeconds != 60 || len(s.Points) == 0 || len(s.Points) > 2 { // the calls may straddle a minute
		t.Fatalf("series: %+v", s)
	}
	if got := s.sum(); got.failed != 2 || got.attempted != 3 || got.enqueued != 5 || got.deduplicated != 1 ||
		got.uncertain != 1 || got.review != 1 || got.succeeded != 0 {
		t.Fatalf("counted %+v in %+v", got, s.Points)
	}
	if s.Now["review"] != 1 || s.Now["pending"] != 2 || s.Now["dead"] != 2 {
		t.Errorf("now: %v", s.Now)
	}
	for _, p := range s.Points {
		if p.Review != 0 || p.Pending != 0 {
			t.Errorf("state counts without any snapshot: %+v", p)
		}
	}
	getJSON(t, h, "/api/series?window=1h&queue=other", &s)
	if got := s.sum(); got.failed != 0 || got.attempted != 1 || got.review != 1 || got.uncertain != 1 || s.Now["review"] != 1 || s.Now["dead"] != 0 {
		t.Fatalf("queue other: %+v (now %v)", got, s.Now)
	}
	// A leader's snapshot adds the state counts of its step.
	now, err := f.ledger.ServerTime(ctx)
	must(t, err)
	for _, q := range []string{"default", "other"} {
		must(t, f.ledger.RecordSeries(ctx, []string{q}, nil, now))
	}
	getJSON(t, h, "/api/series?window=24h", &s)
	if s.StepSeconds != 300 || len(s.Points) == 0 || s.sum().failed != 2 {
		t.Fatalf("day: %+v", s)
	}
	last := s.Points[len(s.Points)-1]
	if !last.At.Equal(now.Truncate(5*time.Minute)) || last.Review != 1 || last.Pending != 2 {
		t.Fatalf("the snapshot's step: %+v", last)
	}
	for _, bad := range []string{"/api/series?window=2h", "/api/series?queue=bad%20q"} {
		if res, body := call(t, h, httptest.NewRequest(http.MethodGet, bad, nil)); res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", bad, res.StatusCode, body)
		}
	}
}

// TestLeaderRecordsHistory: the pool that is the maintenance leader records the
// queues' history buckets, so charts have data without a dashboard open.
func TestLeaderRecordsHistory(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	p, err := worker.NewPool(f.rdb, worker.Config{
		Jobs: jobs.Config{Namespace: f.ns}, Concurrency: 1, Logger: slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Interval: 20 * time.Millisecond},
	})
	must(t, err)
	must(t, worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil })))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var bs []jobs.SeriesBucket
	redistest.Await(t, f.rdb, f.ns, "a history bucket", func() bool {
		var err error
		bs, err = f.ledger.Series(ctx, "default", time.Now().Add(-time.Hour))
		must(t, err)
		return len(bs) > 0
	})
	if bs[0].Counts[jobs.Pending] != 1 || bs[0].Stats["enqueued"] != 1 {
		t.Fatalf("bucket: %+v", bs[0])
	}
}

// TestJobPageLateness: the job page says when a running job's lease is due
// or past, and when a pending job waits past its run time.
func TestJobPageLateness(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{StuckMargin: time.Millisecond})
	sched := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	due := f.enqueue(echoArgs{N: 2}, jobs.Queue("held"))
	_, err := f.client.Pause(ctx, "held", "bob", "hold")
	must(t, err)
	stuck := f.enqueue(echoArgs{N: 3}, jobs.Queue("q2"))
	f.claimOne("q2", stuck, "gone", time.Millisecond)
	// A wait on the clock, not on another goroutine: a sleep never ends
	// early, so 20 ms later the 1 ms lease and the 1 ms margin are past by
	// any clock on this machine, Redis's included.
	time.Sleep(20 * time.Millisecond)

	var d struct {
		Job struct {
			RunAt time.Time `json:"run_at"`
		} `json:"job"`
		ServerTime  time.Time   `json:"server_time"`
		Overdue     bool        `json:"overdue"`
		OverdueMS   *int64      `json:"overdue_ms"`
		Cancellable bool        `json:"cancellable"`
		QueuePaused *jobs.Pause `json:"queue_paused"`
	}
	getJSON(t, h, "/api/jobs/default/"+sched, &d)
	if d.Overdue || d.Job.RunAt.Before(d.ServerTime.Add(59*time.Minute)) || !d.Cancellable || d.QueuePaused != nil {
		t.Fatalf("scheduled job: %+v", d)
	}
	getJSON(t, h, "/api/jobs/held/"+due, &d)
	if !d.Overdue || d.OverdueMS == nil || *d.OverdueMS <= 0 || d.QueuePaused == nil || d.QueuePaused.Actor != "operator:bob" {
		t.Fatalf("due job of a paused queue: %+v", d)
	}
	getJSON(t, h, "/api/jobs/q2/"+stuck, &d)
	if !d.Overdue || d.OverdueMS == nil || *d.OverdueMS <= 0 || !d.Cancellable {
		t.Fatalf("stuck job: %+v", d)
	}
}

// TestBridgedJobIsMarked: a job delivered by asynq through the bridge shows
// where it comes from on its page.
func TestBridgedJobIsMarked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.ledger.ClaimDelivery(ctx, "default", ledger.Delivery{ID: "asynq-task-1", Kind: "email", Payload: []byte(`{}`),
		MaxRetries: 3, Owner: "asynq-1", TTL: time.Minute, Bridge: "asynq"}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Job struct {
			Bridge string `json:"bridge"`
			State  string `json:"state"`
		} `json:"job"`
	}
	getJSON(t, f.handler(dashboard.Options{}), "/api/jobs/default/asynq-task-1", &d)
	if d.Job.Bridge != "asynq" || d.Job.State != "running" {
		t.Fatalf("bridged job view %+v", d.Job)
	}
}
