package maintenance

import (
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// TestRedefinedScheduleDoesNotCatchUpOnItsPast: a schedule whose
// expression changes under its id (a daily report made minutely) runs the
// new expression from the pass that records it. Its ticks from before
// then, while the old expression was in force and its leader ran, are
// not missed ticks: none is enqueued, whatever the catch-up policy.
func TestRedefinedScheduleDoesNotCatchUpOnItsPast(t *testing.T) {
	f := newFixture(t)
	hourly := Periodic{
		Spec: jobs.ScheduleSpec{ID: "report", Schedule: "@every 1h0m0s", TimeZone: "UTC", Kind: "tick", Queue: "report",
			CatchUp: CatchUpAll, Digest: "hourly"},
		Next: func(t time.Time) time.Time { return t.UTC().Truncate(time.Hour).Add(time.Hour) },
		Args: tickArgs{}, Options: []jobs.Option{jobs.Queue("report")},
	}
	cfg := f.config()
	cfg.Periodic = []Periodic{hourly}
	leader := f.lead("pool-a")
	if err := f.leader(cfg).periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	// The schedule has run for a day; its last tick was 40 minutes ago
	// (the leader's passes since found nothing due).
	now, err := f.ledger.ServerTime(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := f.ns + ":{periodic}:schedule:report"
	f.rdb.HSet(f.ctx, key, "created", now.Add(-24*time.Hour).UnixMilli(), "cursor", now.Add(-40*time.Minute).UnixMilli())

	// A deploy makes it minutely (a pool started later).
	minutely := hourly
	minutely.Spec.Schedule, minutely.Spec.Digest, minutely.Next = "@every 1m0s", "minutely", everyMinute
	cfg = f.config()
	cfg.Periodic, cfg.Started = []Periodic{minutely}, now.Add(time.Second)
	if err := f.leader(cfg).periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	sched, err := f.ledger.Schedule(f.ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if sched.Schedule != "@every 1m0s" {
		t.Fatalf("recorded %q, want the new expression", sched.Schedule)
	}
	// At most the minute that may have passed between the two passes.
	if sched.Enqueued > 1 {
		t.Fatalf("the new expression caught up on %d ticks from before it was recorded (skipped %d)", sched.Enqueued, sched.Skipped)
	}
	if sched.Cursor.Before(now.Truncate(time.Minute)) {
		t.Fatalf("cursor %v, want at least the last pass under the old expression (%v)", sched.Cursor, now)
	}
}
