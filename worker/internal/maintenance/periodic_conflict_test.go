package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// reportSchedule is schedule "report" as a pool started at started defines
// it: expr's ticks by next, enqueuing the job of digest job.
func reportSchedule(expr string, next func(time.Time) time.Time, job string) Periodic {
	spec := jobs.ScheduleSpec{ID: "report", Schedule: expr, TimeZone: "UTC", Kind: "tick", Queue: "reports",
		CatchUp: CatchUpLatest, MissedAfter: time.Minute, JobDigest: job, Digest: expr + "/" + job}
	return Periodic{Spec: spec, Next: next, MissedAfter: time.Minute, Args: tickArgs{},
		Options: []jobs.Option{jobs.Queue("reports")}}
}

// every5m ticks on the multiples of five minutes; hourlyAtHalf at half past
// each hour and a millisecond, never a multiple of five minutes.
func every5m(t time.Time) time.Time { return t.UTC().Truncate(5 * time.Minute).Add(5 * time.Minute) }
func hourlyAtHalf(t time.Time) time.Time {
	n := t.UTC().Truncate(time.Hour).Add(30*time.Minute + time.Millisecond)
	if !n.After(t) {
		n = n.Add(time.Hour)
	}
	return n
}

// TestScheduleDefinitionOfNewestPoolWins: a rolling deploy, pool v1 defines
// schedule "report" hourly, pool v2 (started later) every five minutes.
// Once v2's definition is recorded, v1 leading again neither overwrites it
// nor ticks by its own: it ticks by the recorded definition when its job
// is the same, skips the schedule when it is not, and warns once per
// recorded definition, not at every pass. The read shows the conflict. A
// pool started later still (a rollback) records its definition again.
func TestScheduleDefinitionOfNewestPoolWins(t *testing.T) {
	f := newFixture(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	pool := func(id string, started time.Time, p Periodic) *Leader {
		cfg := f.config()
		cfg.WorkerID, cfg.Started, cfg.Periodic = id, started, []Periodic{p}
		cfg.ParseSchedule = func(expr, zone string) (func(time.Time) time.Time, error) {
			if expr != "@every 5m0s" || zone != "UTC" {
				return nil, errors.New("unknown expression")
			}
			return every5m, nil
		}
		return f.leader(cfg)
	}
	v1 := pool("pool-v1", t0, reportSchedule("@every 1h0m0s", hourlyAtHalf, "job"))
	v2 := pool("pool-v2", t0.Add(time.Minute), reportSchedule("@every 5m0s", every5m, "job"))
	v1other := pool("pool-v1b", t0, reportSchedule("@every 1h0m0s", hourlyAtHalf, "other-job"))
	tok := f.lead("pool-v1")
	pass := func(l *Leader) {
		t.Helper()
		tok++
		if err := l.periodic.runOnce(f.ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *jobs.Schedule {
		t.Helper()
		s, err := f.ledger.Schedule(f.ctx, "report")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	count := func(msg string) int { return strings.Count(f.logs.String(), msg) }
	const ticking = "defined otherwise by a more recently started pool: ticking by its definition"
	const skipped = "periodic schedule skipped: a more recently started pool defines it otherwise"

	pass(v1)
	pass(v2)
	for range 2 { // leadership flaps back to v1
		pass(v1)
	}
	s := read()
	if s.Schedule != "@every 5m0s" || s.Owner.Pool != "pool-v2" || !s.Owner.Started.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after v1 led again: %q recorded by %+v, want v2's definition", s.Schedule, s.Owner)
	}
	if s.NextTick.UnixMilli()%(5*time.Minute).Milliseconds() != 0 {
		t.Fatalf("v1 ticked by its own definition: next tick %v", s.NextTick)
	}
	if s.Conflict == nil || s.Conflict.Pool != "pool-v1" || !s.Conflict.Started.Equal(t0) || s.Conflict.Digest != "@every 1h0m0s/job" {
		t.Fatalf("conflict %+v, want pool-v1's definition", s.Conflict)
	}
	if n := count(ticking); n != 1 {
		t.Fatalf("%d conflict warnings over two passes, want 1", n)
	}
	_, err := f.ledger.RegisterScheduleAt(f.ctx, tok+1, v1.periodic.schedules[0].Spec,
		jobs.ScheduleOwner{Pool: "pool-v1", Started: t0}, time.Time{})
	if !errors.Is(err, jobs.ErrScheduleConflict) {
		t.Fatalf("an older pool's registration: %v, want jobs.ErrScheduleConflict", err)
	}
	tok++

	// Another job under the same id: not runnable by the recorded timing.
	before := read()
	for range 2 {
		pass(v1other)
	}
	if s := read(); s.Schedule != "@every 5m0s" || !s.NextTick.Equal(before.NextTick) || s.Enqueued != before.Enqueued {
		t.Fatalf("a pool with another job wrote %+v", s)
	}
	if n := count(skipped); n != 1 {
		t.Fatalf("%d skip warnings over two passes, want 1", n)
	}

	// A rollback: v1's definition from a pool started after v2's wins.
	pass(pool("pool-v1", t0.Add(2*time.Minute), reportSchedule("@every 1h0m0s", hourlyAtHalf, "job")))
	if s := read(); s.Schedule != "@every 1h0m0s" || s.Owner.Pool != "pool-v1" || s.Conflict != nil {
		t.Fatalf("after the rollback: %q by %+v, conflict %+v; want v1's definition", s.Schedule, s.Owner, s.Conflict)
	}
}
