package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// recordTick enqueues schedule id's tick at tick as a scheduler leader
// does (operation id periodic:<id>:<tick>) and records it in the ledger.
func (e *operatorEnv) recordTick(id string, leader lease.Token, tick, next time.Time) string {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 1},
		jobs.OperationID(jobs.PeriodicOperationID(id, tick)))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.ledger.RecordTicks(ctx, id, leader, ledger.TickRecord{Cursor: tick, Next: next,
		Ticks: []jobs.Tick{{Time: tick, JobID: res.JobID, Queue: res.Queue, Deduplicated: res.Deduplicated}}}); err != nil {
		e.t.Fatal(err)
	}
	return res.JobID
}

// TestSchedulesCommand: schedules lists every schedule with its last and
// next tick and the job each tick produced (and that job's state), as a
// table and as snake_case JSON; --id shows one; an unknown id exits 1.
func TestSchedulesCommand(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()

	code, out, errOut := e.cli("schedules")
	if code != 0 || !strings.Contains(out, "0 schedule(s)\n") {
		t.Fatalf("no schedules: %d %q %q", code, out, errOut)
	}
	if code, out, _ := e.cli("schedules", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("no schedules --json: %d %q", code, out)
	}

	const leader = lease.Token(7)
	for _, spec := range []jobs.ScheduleSpec{
		{ID: "ops-report", Schedule: "0 9 * * MON-FRI", TimeZone: "Europe/Paris", Kind: "transfer", Queue: "default", CatchUp: "latest"},
		{ID: "sync", Schedule: "@every 15m0s", TimeZone: "UTC", Kind: "transfer", Queue: "default", CatchUp: "all"},
	} {
		if _, err := e.ledger.RegisterSchedule(ctx, leader, spec); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	first := e.recordTick("ops-report", leader, t0, t0.Add(24*time.Hour))
	second := e.recordTick("ops-report", leader, t0.Add(24*time.Hour), t0.Add(48*time.Hour))
	if _, err := e.client.Cancel(ctx, "default", first, "alice", "not this one"); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = e.cli("schedules", "--json")
	var got []struct {
		ID           string    `json:"id"`
		Schedule     string    `json:"schedule"`
		TimeZone     string    `json:"time_zone"`
		CatchUp      string    `json:"catch_up"`
		LastTick     time.Time `json:"last_tick"`
		LastJob      string    `json:"last_job"`
		LastJobState string    `json:"last_job_state"`
		NextTick     time.Time `json:"next_tick"`
		Enqueued     int64     `json:"enqueued"`
		Leader       string    `json:"leader"`
		Ticks        []struct {
			Time        time.Time `json:"time"`
			JobID       string    `json:"job_id"`
			JobState    string    `json:"job_state"`
			OperationID string    `json:"operation_id"`
			Queue       string    `json:"queue"`
		} `json:"ticks"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 2 {
		t.Fatalf("schedules --json: %d %q %q", code, out, errOut)
	}
	r := got[0]
	if r.ID != "ops-report" || r.Schedule != "0 9 * * MON-FRI" || r.TimeZone != "Europe/Paris" || r.CatchUp != "latest" ||
		!r.LastTick.Equal(t0.Add(24*time.Hour)) || r.LastJob != second || r.LastJobState != "pending" ||
		!r.NextTick.Equal(t0.Add(48*time.Hour)) || r.Enqueued != 2 || r.Leader != "7" || len(r.Ticks) != 2 {
		t.Fatalf("ops-report: %+v", r)
	}
	if r.Ticks[0].JobID != second || r.Ticks[0].JobState != "pending" || !r.Ticks[0].Time.Equal(t0.Add(24*time.Hour)) ||
		r.Ticks[1].JobID != first || r.Ticks[1].JobState != "cancelled" ||
		r.Ticks[1].OperationID != jobs.PeriodicOperationID("ops-report", t0) || r.Ticks[1].Queue != "default" {
		t.Fatalf("ops-report ticks: %+v", r.Ticks)
	}
	if got[1].ID != "sync" || got[1].LastJob != "" || got[1].LastJobState != "" || len(got[1].Ticks) != 0 || got[1].Ticks == nil {
		t.Fatalf("sync: %+v", got[1])
	}
	// No key outside snake_case.
	var raw []map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for k := range raw[0] {
		if strings.ToLower(k) != k || strings.Contains(k, "-") {
			t.Errorf("key %q is not snake_case", k)
		}
	}

	code, out, errOut = e.cli("schedules")
	t.Logf("schedules:\n%s", out)
	if code != 0 || !strings.Contains(out, "2 schedule(s)\n") || !strings.Contains(out, second+" (pending)") ||
		!strings.Contains(out, "ticks of ops-report, newest first:") || !strings.Contains(out, "2030-01-08T08:00:00Z") ||
		!strings.Contains(out, first) || strings.Contains(out, "ticks of sync") {
		t.Fatalf("schedules: %d %q %q", code, out, errOut)
	}

	code, out, _ = e.cli("schedules", "--id", "ops-report", "--ticks", "1", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || len(got[0].Ticks) != 1 || got[0].Ticks[0].JobID != second {
		t.Fatalf("--id --ticks 1: %d %q", code, out)
	}
	if code, _, errOut := e.cli("schedules", "--id", "nope"); code != 1 || !strings.Contains(errOut, "schedule nope not found") || strings.Contains(errOut, "job not found") {
		t.Fatalf("unknown schedule: %d %q", code, errOut)
	}
	if code, out, errOut := e.cli("schedules", "--id", "sync", "--remove", "--actor", "ops"); code != 0 || !strings.Contains(out, "removed schedule sync") {
		t.Fatalf("--remove: %d %q %q", code, out, errOut)
	}
	if code, out, _ := e.cli("schedules", "--json"); code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].ID != "ops-report" {
		t.Fatalf("after --remove: %d %q", code, out)
	}
	if code, _, errOut := e.cli("schedules", "--id", "sync", "--remove", "--actor", "ops"); code != 1 || !strings.Contains(errOut, "schedule sync not found") || strings.Contains(errOut, "job not found") {
		t.Fatalf("--remove twice: %d %q", code, errOut)
	}
	for _, bad := range [][]string{{"--id", "a:b"}, {"--ticks", "101"}, {"--ticks", "-1"}, {"--remove"}, {"--id", "sync", "--note", "retired"}} {
		if code, _, errOut := e.cli(append([]string{"schedules"}, bad...)...); code != 2 {
			t.Errorf("%v: %d %q", bad, code, errOut)
		}
	}
}

// TestSchedulesRemoveJSON: schedules --remove --json prints JSON, as every
// --json output does.
func TestSchedulesRemoveJSON(t *testing.T) {
	e := newOperatorEnv(t)
	if _, err := e.ledger.RegisterSchedule(context.Background(), 7, jobs.ScheduleSpec{ID: "gone", Schedule: "@every 1h0m0s",
		TimeZone: "UTC", Kind: "transfer", Queue: "default", CatchUp: "latest"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("schedules", "--id", "gone", "--remove", "--actor", "ops", "--json")
	var got struct {
		ID      string `json:"id"`
		Removed bool   `json:"removed"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.ID != "gone" || !got.Removed {
		t.Fatalf("--remove --json: %d %q %q", code, out, errOut)
	}
}

// TestSchedulesShowsConflict: a schedule whose definition a pool started
// earlier registers otherwise shows the conflict, naming both pools, in
// the table and in the JSON.
func TestSchedulesShowsConflict(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	spec := jobs.ScheduleSpec{ID: "report", Schedule: "@every 5m0s", TimeZone: "UTC", Kind: "transfer", Queue: "default",
		CatchUp: "latest", Digest: "d-new"}
	if _, err := e.ledger.RegisterScheduleAt(ctx, 7, spec, jobs.ScheduleOwner{Pool: "pool-v2", Started: t0.Add(time.Minute)}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	spec.Schedule, spec.Digest = "@every 1h0m0s", "d-old"
	if _, err := e.ledger.RegisterScheduleAt(ctx, 8, spec, jobs.ScheduleOwner{Pool: "pool-v1", Started: t0}, time.Time{}); !errors.Is(err, jobs.ErrScheduleConflict) {
		t.Fatalf("the older pool's registration: %v, want jobs.ErrScheduleConflict", err)
	}
	code, out, errOut := e.cli("schedules")
	if code != 0 || !strings.Contains(out, "conflict on report: pool pool-v1 (started 2030-01-07T08:00:00Z) defines it otherwise (definition d-old, since 20") ||
		!strings.Contains(out, "pool pool-v2's definition (started 2030-01-07T08:01:00Z) is recorded") {
		t.Fatalf("schedules: %d %q %q", code, out, errOut)
	}
	code, out, _ = e.cli("schedules", "--json")
	var got []struct {
		Owner    struct{ Pool string } `json:"owner"`
		Conflict struct {
			Pool   string `json:"pool"`
			Digest string `json:"digest"`
		} `json:"conflict"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Owner.Pool != "pool-v2" ||
		got[0].Conflict.Pool != "pool-v1" || got[0].Conflict.Digest != "d-old" {
		t.Fatalf("schedules --json: %d %q", code, out)
	}
}

// TestSchedulesRemoveRefusedWhileDefined: --remove of a schedule a live
// pool still defines fails, naming the pool, and keeps the record.
func TestSchedulesRemoveRefusedWhileDefined(t *testing.T) {
	e := newOperatorEnv(t)
	ctx := context.Background()
	if _, err := e.ledger.RegisterSchedule(ctx, 7, jobs.ScheduleSpec{ID: "report", Schedule: "@every 1h0m0s",
		TimeZone: "UTC", Kind: "transfer", Queue: "default", CatchUp: "latest"}); err != nil {
		t.Fatal(err)
	}
	if err := e.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-reports", Schedules: []string{"report"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := e.cli("schedules", "--id", "report", "--remove", "--actor", "ops")
	if code != 1 || !strings.Contains(errOut, "still defined by live pools pool-reports") {
		t.Fatalf("--remove of a defined schedule: %d %q %q", code, out, errOut)
	}
	if _, err := e.ledger.Schedule(ctx, "report"); err != nil {
		t.Fatalf("the refused removal deleted the record: %v", err)
	}
}
