package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

type schedulesJSON struct {
	ServerTime  time.Time `json:"server_time"`
	Total       int       `json:"total"`
	Maintenance struct {
		Present bool `json:"present"`
	} `json:"maintenance"`
	Schedules []struct {
		ID           string    `json:"id"`
		Schedule     string    `json:"schedule"`
		TimeZone     string    `json:"time_zone"`
		Kind         string    `json:"kind"`
		Queue        string    `json:"queue"`
		CatchUp      string    `json:"catch_up"`
		Created      time.Time `json:"created"`
		Seen         time.Time `json:"seen"`
		SeenAgeMS    *int64    `json:"seen_age_ms"`
		LastTick     time.Time `json:"last_tick"`
		LastJob      string    `json:"last_job"`
		LastJobState string    `json:"last_job_state"`
		NextTick     time.Time `json:"next_tick"`
		Enqueued     int64     `json:"enqueued"`
		Leader       string    `json:"leader"`
		Ticks        []struct {
			Time         time.Time `json:"time"`
			JobID        string    `json:"job_id"`
			Queue        string    `json:"queue"`
			OperationID  string    `json:"operation_id"`
			JobState     string    `json:"job_state"`
			Deduplicated bool      `json:"deduplicated"`
			Leader       string    `json:"leader"`
		} `json:"ticks"`
	} `json:"schedules"`
}

// TestSchedulesAPI: api/schedules lists every schedule with its last and
// next tick and the newest ticks, each with the state of the job it
// produced ("gone" past retention); ?id= shows one, ?ticks= bounds the
// ticks; bad parameters are 400, an unknown schedule 404; markup comes back
// as escaped JSON.
func TestSchedulesAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})

	var out schedulesJSON
	getJSON(t, h, "/api/schedules", &out)
	if out.Total != 0 || out.Schedules == nil || len(out.Schedules) != 0 || out.ServerTime.IsZero() {
		t.Fatalf("no schedules: %+v", out)
	}

	now, err := f.ledger.ServerTime(ctx)
	must(t, err)
	f.schedules(now)
	hour := now.Truncate(time.Hour)

	body := getJSON(t, h, "/api/schedules", &out)
	if out.Total != 2 || len(out.Schedules) != 2 {
		t.Fatalf("schedules: %s", body)
	}
	s := out.Schedules[0]
	if s.ID != "hourly-echo" || s.Schedule != "@every 1h0m0s" || s.TimeZone != "UTC" || s.Kind != "echo" || s.Queue != "reports" ||
		s.CatchUp != "latest" || s.Created.IsZero() || s.Seen.IsZero() || s.SeenAgeMS == nil || *s.SeenAgeMS < 0 ||
		!s.LastTick.Equal(hour) || s.LastJob != f.tickJob || s.LastJobState != "pending" || !s.NextTick.Equal(hour.Add(time.Hour)) ||
		s.Enqueued != 3 || s.Leader != "42" {
		t.Fatalf("hourly-echo: %+v", s)
	}
	if len(s.Ticks) != 3 {
		t.Fatalf("ticks: %+v", s.Ticks)
	}
	for i, want := range []struct {
		at    time.Time
		job   string
		state string
		dedup bool
	}{{hour, f.tickJob, "pending", false}, {hour.Add(-time.Hour), f.tickJob, "pending", true}, {hour.Add(-2 * time.Hour), "job-past-retention", "gone", false}} {
		tk := s.Ticks[i]
		if !tk.Time.Equal(want.at) || tk.JobID != want.job || tk.JobState != want.state || tk.Deduplicated != want.dedup ||
			tk.Queue != "reports" || tk.OperationID != jobs.PeriodicOperationID("hourly-echo", want.at) || tk.Leader != "42" {
			t.Errorf("tick %d: %+v", i, tk)
		}
	}
	if n := out.Schedules[1]; n.ID != "nightly-report" || n.TimeZone != xss || n.LastJob != "" || n.LastJobState != "" || n.Ticks == nil || len(n.Ticks) != 0 {
		t.Fatalf("nightly-report: %+v", n)
	}
	if strings.Contains(string(body), "<script>") {
		t.Fatalf("markup not escaped in the JSON: %s", body)
	}

	getJSON(t, h, "/api/schedules?id=hourly-echo&ticks=1", &out)
	if out.Total != 1 || len(out.Schedules) != 1 || len(out.Schedules[0].Ticks) != 1 || out.Schedules[0].Ticks[0].JobState != "pending" {
		t.Fatalf("?id&ticks=1: %+v", out)
	}
	getJSON(t, h, "/api/schedules?ticks=0", &out)
	if len(out.Schedules) != 2 || len(out.Schedules[0].Ticks) != 0 {
		t.Fatalf("?ticks=0: %+v", out)
	}
	// A cancelled tick job shows as cancelled.
	_, err = f.client.Cancel(ctx, "reports", f.tickJob, "alice", "skip this hour")
	must(t, err)
	getJSON(t, h, "/api/schedules?id=hourly-echo", &out)
	if out.Schedules[0].LastJobState != "cancelled" || out.Schedules[0].Ticks[0].JobState != "cancelled" {
		t.Fatalf("after cancel: %+v", out.Schedules[0])
	}

	for path, code := range map[string]int{
		"/api/schedules?id=nope":       http.StatusNotFound,
		"/api/schedules?id=a:b":        http.StatusBadRequest,
		"/api/schedules?id=" + xss:     http.StatusBadRequest,
		"/api/schedules?ticks=-1":      http.StatusBadRequest,
		"/api/schedules?ticks=lots":    http.StatusBadRequest,
		"/api/schedules?ticks=1000000": http.StatusBadRequest, // past the range, never cut to it
	} {
		res, b := call(t, h, httptest.NewRequest(http.MethodGet, path, nil))
		if res.StatusCode != code || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || strings.Contains(string(b), "<script>") {
			t.Errorf("GET %s: %d %s", path, res.StatusCode, b)
		}
	}
}

// TestSchedulesAPIConflict: a schedule whose definition an older pool
// registers otherwise shows the recorded definition's pool and the losing
// one, with its digest, since when and its last try.
func TestSchedulesAPIConflict(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	t0 := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	spec := jobs.ScheduleSpec{ID: "report", Schedule: "@every 5m0s", TimeZone: "UTC", Kind: "echo", Queue: "reports",
		CatchUp: "latest", Digest: "d-new"}
	_, err := f.ledger.RegisterScheduleAt(ctx, 7, spec, jobs.ScheduleOwner{Pool: "pool-v2", Started: t0.Add(time.Minute)}, time.Time{})
	must(t, err)
	spec.Schedule, spec.Digest = "@every 1h0m0s", "d-old"
	for tok := range 2 { // the older pool's leader tries twice: since stays, seen moves
		if _, err := f.ledger.RegisterScheduleAt(ctx, lease.Token(8+tok), spec, jobs.ScheduleOwner{Pool: "pool-v1", Started: t0}, time.Time{}); !errors.Is(err, jobs.ErrScheduleConflict) {
			t.Fatalf("the older pool's registration: %v, want jobs.ErrScheduleConflict", err)
		}
	}
	var out struct {
		Schedules []struct {
			ID    string `json:"id"`
			Owner struct {
				Pool    string    `json:"pool"`
				Started time.Time `json:"started"`
			} `json:"owner"`
			Conflict *struct {
				Pool    string    `json:"pool"`
				Started time.Time `json:"started"`
				Digest  string    `json:"digest"`
				Since   time.Time `json:"since"`
				Seen    time.Time `json:"seen"`
			} `json:"conflict"`
		} `json:"schedules"`
	}
	body := getJSON(t, h, "/api/schedules?id=report", &out)
	if len(out.Schedules) != 1 {
		t.Fatalf("schedules: %s", body)
	}
	s := out.Schedules[0]
	if s.Owner.Pool != "pool-v2" || !s.Owner.Started.Equal(t0.Add(time.Minute)) {
		t.Fatalf("owner: %s", body)
	}
	if c := s.Conflict; c == nil || c.Pool != "pool-v1" || !c.Started.Equal(t0) || c.Digest != "d-old" || c.Since.IsZero() ||
		c.Seen.Before(c.Since) {
		t.Fatalf("conflict: %s", body)
	}
}

// TestSchedulesAPITicksOfAllAreBounded: each tick shown costs a read of its
// job, so across every schedule ?ticks= takes at most the default (5), a
// larger one refused; one schedule's (?id=) shows up to 100.
func TestSchedulesAPITicksOfAllAreBounded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(dashboard.Options{})
	const leader = lease.Token(42)
	_, err := f.ledger.RegisterSchedule(ctx, leader, jobs.ScheduleSpec{ID: "minutely", Schedule: "@every 1m0s", TimeZone: "UTC",
		Kind: "echo", Queue: "reports", CatchUp: "latest"})
	must(t, err)
	now, err := f.ledger.ServerTime(ctx)
	must(t, err)
	at := now.Truncate(time.Minute)
	var ticks []jobs.Tick
	for i := 8; i > 0; i-- {
		ticks = append(ticks, jobs.Tick{Time: at.Add(-time.Duration(i) * time.Minute), JobID: fmt.Sprintf("job-%d", i), Queue: "reports"})
	}
	must(t, f.ledger.RecordTicks(ctx, "minutely", leader, ledger.TickRecord{Cursor: at, Next: at.Add(time.Minute), Ticks: ticks}))

	var out schedulesJSON
	getJSON(t, h, "/api/schedules?ticks=5", &out)
	if len(out.Schedules) != 1 || len(out.Schedules[0].Ticks) != 5 {
		t.Fatalf("all schedules, ?ticks=5: %+v, want 5 ticks", out.Schedules)
	}
	if res, b := call(t, h, httptest.NewRequest(http.MethodGet, "/api/schedules?ticks=6", nil)); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("all schedules, ?ticks=6: %d %s, want 400 (more only for one schedule)", res.StatusCode, b)
	}
	getJSON(t, h, "/api/schedules?id=minutely&ticks=100", &out)
	if len(out.Schedules) != 1 || len(out.Schedules[0].Ticks) != 8 {
		t.Fatalf("one schedule, ?ticks=100: %+v, want its 8 ticks", out.Schedules)
	}
}
