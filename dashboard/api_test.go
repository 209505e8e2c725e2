package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// The API's JSON, as a client reads it.
type (
	overviewJSON struct {
		Namespace      string         `json:"namespace"`
		ServerTime     time.Time      `json:"server_time"`
		ActionsEnabled bool           `json:"actions_enabled"`
		Totals         map[string]int `json:"totals"`
		Paused         []string       `json:"paused"`
		Maintenance    struct {
			Present        bool      `json:"present"`
			Leader         string    `json:"leader"`
			Token          string    `json:"token"`
			RecordedLeader string    `json:"recorded_leader"`
			RecordedToken  string    `json:"recorded_token"`
			LastScan       time.Time `json:"last_scan"`
			LastScanAgeMS  *int64    `json:"last_scan_age_ms"`
			Expired        int       `json:"expired"`
			Resolved       int       `json:"resolved"`
		} `json:"maintenance"`
		Queues []struct {
			Name             string           `json:"name"`
			Counts           map[string]int   `json:"counts"`
			Paused           *jobs.Pause      `json:"paused"`
			Stats            map[string]int   `json:"stats"`
			FencedRejections int              `json:"fenced_rejections"`
			Fenced           map[string]int   `json:"fenced"`
			Deduplicated     int              `json:"deduplicated"`
			Deduplications   map[string]int   `json:"deduplications"`
			Throughput       *json.RawMessage `json:"throughput"`
		} `json:"queues"`
	}
	jobJSON struct {
		ID          string          `json:"id"`
		Queue       string          `json:"queue"`
		Kind        string          `json:"kind"`
		OperationID string          `json:"operation_id"`
		State       string          `json:"state"`
		Token       string          `json:"token"`
		Owner       string          `json:"owner"`
		Fence       string          `json:"fence"`
		CancelBy    string          `json:"cancel_requested_by"`
		Deadline    time.Time       `json:"deadline"`
		Attempts    int             `json:"attempts"`
		Args        json.RawMessage `json:"args"`
		Error       string          `json:"error"`
		Reason      string          `json:"reason"`
		OverdueMS   *int64          `json:"overdue_ms"`
		History     []jobs.Entry    `json:"history"`
	}
	listJSON struct {
		State string    `json:"state"`
		Total int       `json:"total"`
		Jobs  []jobJSON `json:"jobs"`
	}
	detailJSON struct {
		Job      jobJSON `json:"job"`
		Attempts []struct {
			Attempt int       `json:"attempt"`
			Token   string    `json:"token"`
			Owner   string    `json:"owner"`
			Started time.Time `json:"started"`
			Ended   time.Time `json:"ended"`
			Outcome string    `json:"outcome"`
			Error   string    `json:"error"`
			Reason  string    `json:"reason"`
			Fenced  []struct {
				Stage   string `json:"stage"`
				Outcome string `json:"outcome"`
			} `json:"fenced"`
		} `json:"attempts"`
		History        []jobs.Entry `json:"history"`
		Decisions      []string     `json:"decisions"`
		ActionsEnabled bool         `json:"actions_enabled"`
	}
	eventsJSON struct {
		Events []struct {
			Queue string `json:"queue"`
			Type  string `json:"type"`
			Stage string `json:"stage"`
			Job   string `json:"job"`
			Op    string `json:"op"`
			Token string `json:"token"`
			Actor string `json:"actor"`
			Note  string `json:"note"`
		} `json:"events"`
	}
	searchJSON struct {
		Matches []struct {
			By  string  `json:"by"`
			Job jobJSON `json:"job"`
		} `json:"matches"`
	}
	stuckJSON struct {
		MarginMS int64     `json:"margin_ms"`
		Jobs     []jobJSON `json:"jobs"`
	}
)

// TestAPI reads a namespace holding jobs in every state through the JSON API.
func TestAPI(t *testing.T) {
	f := newFixture(t).seed()
	h := f.handler(dashboard.Options{})
	ctx := context.Background()

	t.Run("overview", func(t *testing.T) {
		var ov overviewJSON
		getJSON(t, h, "/api/overview", &ov)
		if ov.Namespace != f.ns || ov.ActionsEnabled || ov.ServerTime.IsZero() {
			t.Fatalf("overview header: %+v", ov)
		}
		if ov.Maintenance.Present {
			t.Fatalf("leader present without a status hash: %+v", ov.Maintenance)
		}
		byName := map[string]int{}
		for i, q := range ov.Queues {
			byName[q.Name] = i
		}
		def, slow := ov.Queues[byName["default"]], ov.Queues[byName["slow"]]
		want := map[string]int{"pending": 1, "running": 0, "uncertain": 1, "review": 1, "succeeded": 1, "dead": 1, "cancelled": 1}
		for s, n := range want {
			if def.Counts[s] != n {
				t.Errorf("default %s = %d, want %d (%v)", s, def.Counts[s], n, def.Counts)
			}
		}
		if slow.Counts["running"] != 2 || slow.FencedRejections != 1 || slow.Fenced["commit"] != 1 {
			t.Errorf("slow queue: %+v", slow)
		}
		if def.Deduplicated != 2 || def.Deduplications["enqueue"] != 1 || def.Deduplications["execute"] != 1 {
			t.Errorf("deduplications: %d %v", def.Deduplicated, def.Deduplications)
		}
		if def.Stats["succeeded"] != 1 || def.Stats["attempted"] != 4 || def.Stats["enqueued"] != 6 || def.Stats["cancelled"] != 1 {
			t.Errorf("stats: %v", def.Stats)
		}
		if ov.Totals["running"] != 2 || ov.Totals["review"] != 1 || ov.Totals["cancelled"] != 1 {
			t.Errorf("totals: %v", ov.Totals)
		}
		if def.Paused != nil || slow.Paused == nil || slow.Paused.Actor != "operator:bob" || slow.Paused.Note != "gateway maintenance" ||
			slow.Paused.At.IsZero() || !slices.Equal(ov.Paused, []string{"slow"}) {
			t.Errorf("paused: default %+v, slow %+v, list %v", def.Paused, slow.Paused, ov.Paused)
		}
		// Counts agree with the ledger's own.
		counts, err := f.ledger.Counts(ctx, "default")
		must(t, err)
		for s, n := range counts {
			if int64(def.Counts[string(s)]) != n {
				t.Errorf("%s: api %d, ledger %d", s, def.Counts[string(s)], n)
			}
		}

		// The leader's published status without a live leader lease: the
		// last leader is shown, but as gone.
		now := time.Now()
		must(t, f.ledger.SetLeaderStatus(ctx, ledger.LeaderStatus{Leader: "pool-a", Token: 42, LastScan: now, Expired: 1, Resolved: 2}))
		getJSON(t, h, "/api/overview", &ov)
		r := ov.Maintenance
		if r.Present || r.Leader != "" || r.RecordedLeader != "pool-a" || r.RecordedToken != "" ||
			r.Expired != 1 || r.Resolved != 2 || r.LastScan.UnixMilli() != now.UnixMilli() || r.LastScanAgeMS == nil {
			t.Fatalf("leader status without a lease: %+v", r)
		}
		// While a pool holds the leader lease, it is the leader.
		l, err := lease.NewManager(f.rdb, lease.Config{Namespace: f.ns}).Acquire(ctx, ledger.LeaderResource, "pool-b", time.Minute)
		must(t, err)
		getJSON(t, h, "/api/overview", &ov)
		if r := ov.Maintenance; !r.Present || r.Leader != "pool-b" || r.Token != "" || r.RecordedLeader != "pool-a" || l.Token == 0 {
			t.Fatalf("leader with a lease: %+v", r)
		}
	})

	t.Run("jobs", func(t *testing.T) {
		var l listJSON
		getJSON(t, h, "/api/jobs?state=uncertain&queue=default", &l)
		if l.Total != 1 || len(l.Jobs) != 1 || l.Jobs[0].ID != f.uncertain {
			t.Fatalf("uncertain list: %+v", l)
		}
		j := l.Jobs[0]
		if !strings.Contains(j.Error, xss) || j.Reason == "" || j.Kind != "charge" {
			t.Fatalf("uncertain job evidence: %+v", j)
		}
		// Across queues, with history inline.
		getJSON(t, h, "/api/jobs?state=review&history=1", &l)
		if l.Total != 1 || len(l.Jobs) != 1 || l.Jobs[0].ID != f.review {
			t.Fatalf("review list: %+v", l)
		}
		hist := l.Jobs[0].History
		if len(hist) == 0 || hist[len(hist)-1].Event != "resolve" || hist[len(hist)-1].Note != "cannot tell after 3 tries" {
			t.Fatalf("review history: %+v", hist)
		}
		getJSON(t, h, "/api/jobs?state=cancelled", &l)
		if l.Total != 1 || len(l.Jobs) != 1 || l.Jobs[0].ID != f.cancelled {
			t.Fatalf("cancelled list: %+v", l)
		}
		getJSON(t, h, "/api/jobs?state=running", &l)
		if l.Total != 2 || len(l.Jobs) != 2 {
			t.Fatalf("running: %+v", l)
		}
		getJSON(t, h, "/api/jobs?state=running&queue=slow&offset=1&limit=1", &l)
		if l.Total != 2 || len(l.Jobs) != 1 {
			t.Fatalf("running page 2: %+v", l)
		}
		for _, bad := range []string{
			"/api/jobs?state=nope", "/api/jobs", "/api/jobs?state=dead&queue=bad%20queue",
			"/api/jobs?state=dead&queue=default&limit=-1", "/api/jobs?state=dead&sort=up",
			"/api/jobs?state=dead&kind=bad%20kind", "/api/jobs?state=dead&from=yesterday",
			"/api/jobs?state=dead&from=2000&to=1000",
		} {
			if res, body := call(t, h, httptest.NewRequest("GET", bad, nil)); res.StatusCode != http.StatusBadRequest {
				t.Errorf("GET %s: %d %s", bad, res.StatusCode, body)
			}
		}
	})

	t.Run("job detail", func(t *testing.T) {
		var d detailJSON
		body := getJSON(t, h, "/api/jobs/default/"+f.uncertain, &d)
		if d.Job.ID != f.uncertain || d.Job.State != "uncertain" || d.Job.OperationID != "op-charge-1" {
			t.Fatalf("job: %+v", d.Job)
		}
		if len(d.Attempts) != 1 {
			t.Fatalf("attempts: %+v", d.Attempts)
		}
		a := d.Attempts[0]
		if a.Attempt != 1 || a.Token == "" || a.Token != d.Job.Token || a.Owner != "" || d.Job.Owner != "" ||
			a.Started.IsZero() || a.Ended.Before(a.Started) || a.Outcome != "uncertain" || !strings.Contains(a.Error, xss) {
			t.Fatalf("attempt: %+v", a)
		}
		if !slices.Equal(d.Decisions, []string{"succeeded", "rerun", "dead"}) || d.ActionsEnabled {
			t.Fatalf("decisions %v, actions %v", d.Decisions, d.ActionsEnabled)
		}
		var args map[string]string
		must(t, json.Unmarshal(d.Job.Args, &args))
		if args["card"] != jobs.Redacted || args["memo"] != xss || args["account"] != "acct-1" {
			t.Fatalf("args: %v", args)
		}
		if strings.Contains(string(body), secret) || strings.Contains(string(body), `"payload"`) {
			t.Fatalf("the raw payload leaked: %s", body)
		}

		// A job with a fenced commit shows it on the attempt.
		// A commit by a token that never ran it shows as a fenced attempt.
		var stuck detailJSON
		getJSON(t, h, "/api/jobs/slow/"+f.stuck, &stuck)
		tok, _ := strconv.ParseUint(f.stuckTok, 10, 64)
		if a := stuck.Attempts; len(a) != 2 || a[0].Outcome != "running" || a[0].Token != f.stuckTok || a[0].Error != "" ||
			a[1].Outcome != "fenced" || a[1].Token != strconv.FormatUint(tok-1, 10) || len(a[1].Fenced) != 1 ||
			a[1].Fenced[0].Stage != "commit" || a[1].Fenced[0].Outcome != "succeeded" {
			t.Fatalf("stuck attempts: %+v", a)
		}
		var done detailJSON
		getJSON(t, h, "/api/jobs/default/"+f.echo, &done)
		if done.Job.State != "succeeded" || len(done.Decisions) != 0 || len(done.Attempts) != 1 || done.Attempts[0].Outcome != "succeeded" {
			t.Fatalf("succeeded job: %+v", done)
		}
		// A cancelled job: a final state with who and why, and a re-run offered.
		var c detailJSON
		getJSON(t, h, "/api/jobs/default/"+f.cancelled, &c)
		if c.Job.State != "cancelled" || c.Job.Reason != "cancelled by operator:alice" || !slices.Equal(c.Decisions, []string{"rerun"}) ||
			len(c.Attempts) != 0 {
			t.Fatalf("cancelled job: %+v", c)
		}
		if last := c.History[len(c.History)-1]; last.Event != "cancel" || last.Actor != "operator:alice" || last.Note != "customer withdrew" || last.From != "pending" {
			t.Fatalf("cancel in the history: %+v", c.History)
		}
		// A running job an operator asked to stop still runs under its token.
		var run detailJSON
		getJSON(t, h, "/api/jobs/slow/"+f.healthy, &run)
		if run.Job.State != "running" || run.Job.CancelBy != "operator:alice" || len(run.Decisions) != 0 ||
			len(run.Attempts) != 1 || run.Attempts[0].Outcome != "running" || run.Attempts[0].Owner != "" {
			t.Fatalf("running job asked to stop: %+v", run)
		}
		if res, _ := call(t, h, httptest.NewRequest("GET", "/api/jobs/default/no-such-job", nil)); res.StatusCode != http.StatusNotFound {
			t.Fatalf("missing job: %d", res.StatusCode)
		}
		if res, _ := call(t, h, httptest.NewRequest("GET", "/api/jobs/bad%7Bq%7D/x", nil)); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad queue: %d", res.StatusCode)
		}
	})

	t.Run("search", func(t *testing.T) {
		var s searchJSON
		getJSON(t, h, "/api/search?q="+f.dead, &s)
		if len(s.Matches) != 1 || s.Matches[0].By != "job_id" || s.Matches[0].Job.State != "dead" {
			t.Fatalf("by id: %+v", s)
		}
		getJSON(t, h, "/api/search?q=op-healthy", &s)
		if len(s.Matches) != 1 || s.Matches[0].By != "operation_id" || s.Matches[0].Job.ID != f.healthy || s.Matches[0].Job.Queue != "slow" {
			t.Fatalf("by operation: %+v", s)
		}
		getJSON(t, h, "/api/search?q=%20nothing-like-this%20", &s)
		if len(s.Matches) != 0 {
			t.Fatalf("no match: %+v", s)
		}
		if res, _ := call(t, h, httptest.NewRequest("GET", "/api/search?q=", nil)); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("empty query: %d", res.StatusCode)
		}
	})

	t.Run("events", func(t *testing.T) {
		var e eventsJSON
		getJSON(t, h, "/api/events?type=deduplicated", &e)
		stages := map[string]bool{}
		for _, ev := range e.Events {
			if ev.Type != "deduplicated" || ev.Queue != "default" || ev.Job != f.echo {
				t.Fatalf("event %+v", ev)
			}
			stages[ev.Stage] = true
			if ev.Stage == "enqueue" && ev.Op != "op-echo" || ev.Stage == "execute" && ev.Op != "" {
				t.Fatalf("event %+v", ev)
			}
		}
		if len(e.Events) != 2 || !stages["enqueue"] || !stages["execute"] {
			t.Fatalf("deduplicated events: %+v", e.Events)
		}
		getJSON(t, h, "/api/events?type=fenced&queue=slow", &e)
		if len(e.Events) != 1 || e.Events[0].Stage != "commit" || e.Events[0].Job != f.stuck {
			t.Fatalf("fenced events: %+v", e.Events)
		}
		getJSON(t, h, "/api/events?type=operator", &e)
		ops := map[string]bool{}
		for _, ev := range e.Events {
			switch {
			case ev.Type == "pause" && ev.Queue == "slow" && ev.Actor == "operator:bob" && ev.Note == "gateway maintenance":
			case ev.Type == "cancel" && ev.Queue == "slow" && ev.Job == f.healthy && ev.Actor == "operator:alice":
			case ev.Type == "cancel" && ev.Queue == "default" && ev.Job == f.cancelled && ev.Actor == "operator:alice":
			default:
				t.Fatalf("operator event %+v", ev)
			}
			ops[ev.Type+ev.Job] = true
		}
		if len(e.Events) != 3 || len(ops) != 3 {
			t.Fatalf("operator events: %+v", e.Events)
		}
		getJSON(t, h, "/api/events?limit=2", &e)
		if len(e.Events) != 2 {
			t.Fatalf("limit: %+v", e.Events)
		}
		if res, _ := call(t, h, httptest.NewRequest("GET", "/api/events?type=other", nil)); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad type: %d", res.StatusCode)
		}
	})

	t.Run("stuck", func(t *testing.T) {
		var s stuckJSON
		getJSON(t, h, "/api/stuck", &s)
		if s.MarginMS != 3000 || len(s.Jobs) != 1 || s.Jobs[0].ID != f.stuck || s.Jobs[0].OverdueMS == nil ||
			s.Jobs[0].Owner != "" || s.Jobs[0].Token != f.stuckTok {
			t.Fatalf("stuck: %+v", s)
		}
		// With a margin beyond the healthy job's lease both are listed, the
		// most overdue first.
		getJSON(t, h, "/api/stuck?margin_ms=3600000", &s)
		if len(s.Jobs) != 2 || s.Jobs[0].ID != f.stuck || s.Jobs[1].ID != f.healthy || *s.Jobs[1].OverdueMS >= 0 {
			t.Fatalf("stuck with a wide margin: %+v", s)
		}
	})
}

// TestJSONEscapesMarkup checks markup in error texts and args is served
// as escaped JSON, never as raw markup.
func TestJSONEscapesMarkup(t *testing.T) {
	f := newFixture(t).seed()
	h := f.handler(dashboard.Options{})
	for _, path := range []string{
		"/api/jobs/default/" + f.uncertain,
		"/api/jobs?state=uncertain&history=1",
		"/api/search?q=op-charge-1",
	} {
		res, body := call(t, h, httptest.NewRequest("GET", path, nil))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		if strings.Contains(string(body), "<script") || !strings.Contains(string(body), `\u003cscript\u003ealert(1)\u003c/script\u003e`) {
			t.Fatalf("%s: markup not escaped: %s", path, body)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Fatalf("%s: content type %q", path, ct)
		}
	}
}

// TestOverviewFollowsTheLeader runs a pool as the maintenance leader and
// watches the overview name it leader, then lose it when the pool stops.
func TestOverviewFollowsTheLeader(t *testing.T) {
	f := newFixture(t)
	f.enqueue(echoArgs{N: 1})
	h := f.handler(dashboard.Options{})
	p, err := worker.NewPool(f.rdb, worker.Config{
		Jobs: jobs.Config{Namespace: f.ns}, LeaseTTL: time.Second, ShutdownTimeout: 5 * time.Second,
		Logger:      slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Interval: 100 * time.Millisecond},
	})
	must(t, err)
	must(t, worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil })))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	defer stop()

	var ov overviewJSON
	// The overview reads Redis: look again after each change there.
	redistest.Await(t, f.rdb, f.ns, "the overview showing pool "+p.ID()+" leading", func() bool {
		getJSON(t, h, "/api/overview", &ov)
		r := ov.Maintenance
		return r.Present && r.Leader == p.ID() && r.RecordedLeader == p.ID() && r.LastScanAgeMS != nil && ov.Totals["succeeded"] == 1
	})
	must(t, stop())
	getJSON(t, h, "/api/overview", &ov)
	if r := ov.Maintenance; r.Present || r.RecordedLeader != p.ID() {
		t.Fatalf("after the pool stopped: %+v", r)
	}
}

// TestJobDetailShowsUniqueKey: a unique job's detail carries its unique key
// and the states in which it holds it (the job page shows them).
func TestJobDetailShowsUniqueKey(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{})
	res, err := f.client.Enqueue(context.Background(), echoArgs{N: 1}, jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByState: []jobs.State{jobs.Pending, jobs.Running}}))
	must(t, err)
	var d struct {
		Job struct {
			UniqueKey    string   `json:"unique_key"`
			UniqueStates []string `json:"unique_states"`
		} `json:"job"`
	}
	getJSON(t, h, "/api/jobs/default/"+res.JobID, &d)
	if d.Job.UniqueKey == "" || strings.Join(d.Job.UniqueStates, ",") != "pending,running,uncertain" {
		t.Fatalf("job detail: unique key %q, states %v", d.Job.UniqueKey, d.Job.UniqueStates)
	}
}

// TestJSONAPIEscapesTerminalControls: a script reading the API in a
// terminal (curl) gets no character a terminal may act on as it is (bidi
// overrides, C1 controls such as the 8-bit CSI, line separators) nor an
// invisible one (a zero-width space, a tag character): they come as \u
// escapes, and the body decodes to the same values.
func TestJSONAPIEscapesTerminalControls(t *testing.T) {
	f := newFixture(t)
	const op = "refund-\u202egnp.exe"
	const note = "memo\u202eabc\u0085"
	const errText = "declined\u009b2J \u2067spoof\u2069\u2028next\u007f pay\u200bee\U000e0041"
	id := f.enqueue(echoArgs{N: 1, Note: note}, jobs.OperationID(op))
	c := f.claimOne("default", id, "w", time.Minute)
	if _, err := f.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Dead, Error: errText, Reason: "permanent"}}}); err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})
	for _, path := range []string{"/api/jobs/default/" + id, "/api/jobs?state=dead", "/api/search?q=refund-"} {
		res, body := call(t, h, httptest.NewRequest(http.MethodGet, path, nil))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, res.StatusCode, body)
		}
		if i := bytes.IndexFunc(body, func(r rune) bool {
			return r >= 0x7f && r <= 0x9f || r == '\u2028' || unicode.Is(unicode.Cf, r)
		}); i >= 0 {
			t.Fatalf("%s: a character a terminal acts on, as it is, at byte %d: %q", path, i, body)
		}
		if !bytes.Contains(body, []byte(`refund-\u202egnp.exe`)) {
			t.Fatalf("%s: the operation id not escaped: %s", path, body)
		}
		if path == "/api/jobs/default/"+id && !bytes.Contains(body, []byte(`pay\u200bee\udb40\udc41`)) {
			t.Fatalf("%s: the invisible characters of the error not escaped: %s", path, body)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want := []string{op}
		if path == "/api/jobs/default/"+id {
			want = append(want, errText)
		}
		for _, s := range want {
			if !holds(v, s) {
				t.Fatalf("%s: decoded body %v does not hold %q", path, v, s)
			}
		}
	}
	var d struct{ Job struct{ Args echoArgs } }
	getJSON(t, h, "/api/jobs/default/"+id, &d)
	if d.Job.Args.Note != note {
		t.Fatalf("args decoded to note %q, want %q", d.Job.Args.Note, note)
	}
}

// holds reports whether decoded JSON v holds string s as a value.
func holds(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return holds(e, s) })
	case map[string]any:
		for _, e := range x {
			if holds(e, s) {
				return true
			}
		}
	}
	return false
}
