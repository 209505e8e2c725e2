package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// TestScheduleConflictEndsWithLosingPools: a conflict stays shown while a
// live pool reports the losing definition; once none does (the older pools
// left), the winning leader's next pass clears it, and the conflicts gauge
// follows.
func TestScheduleConflictEndsWithLosingPools(t *testing.T) {
	f := newFixture(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	old := reportSchedule("@every 1h0m0s", hourlyAtHalf, "job")
	cur := reportSchedule("@every 5m0s", every5m, "job")
	pool := func(id string, started time.Time, p Periodic) *Leader {
		cfg := f.config()
		cfg.WorkerID, cfg.Started, cfg.Periodic = id, started, []Periodic{p}
		return f.leader(cfg)
	}
	beat := func(id string, p Periodic) {
		t.Helper()
		if err := f.ledger.Heartbeat(f.ctx, jobs.PoolInfo{ID: id, Schedules: []string{p.Spec.ID},
			ScheduleDigests: map[string]string{p.Spec.ID: p.Spec.Digest}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	v1 := pool("pool-v1", t0, old)
	v2 := pool("pool-v2", t0.Add(time.Minute), cur)
	beat("pool-v1", old)
	beat("pool-v2", cur)
	tok := f.lead("pool-v1")
	pass := func(l *Leader) {
		t.Helper()
		tok++
		if err := l.periodic.runOnce(f.ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	conflict := func() *jobs.ScheduleConflict {
		t.Helper()
		s, err := f.ledger.Schedule(f.ctx, "report")
		if err != nil {
			t.Fatal(err)
		}
		return s.Conflict
	}
	pass(v2)
	pass(v1)
	pass(v2) // pool-v1 is live: its definition still disagrees
	if c := conflict(); c == nil || c.Pool != "pool-v1" {
		t.Fatalf("conflict while pool-v1 is live: %+v", c)
	}
	if n := testutil.ToFloat64(f.metrics.ScheduleConflicts); n != 1 {
		t.Fatalf("fencedq_schedule_conflicts %v while pool-v1 is live, want 1", n)
	}
	if err := f.ledger.Leave(f.ctx, "pool-v1"); err != nil {
		t.Fatal(err)
	}
	pass(v2)
	if c := conflict(); c != nil {
		t.Fatalf("conflict still recorded after pool-v1 left: %+v", c)
	}
	if n := testutil.ToFloat64(f.metrics.ScheduleConflicts); n != 0 {
		t.Fatalf("fencedq_schedule_conflicts %v after pool-v1 left, want 0", n)
	}
	if !strings.Contains(f.logs.String(), "periodic schedule conflict over") {
		t.Fatalf("the end of the conflict was not logged:\n%s", f.logs.String())
	}
}

// TestScheduleTakenOverWhenNewerPoolsLeave: the reverse of a finished
// rolling deploy. Pool v2 (started last) recorded its definition of
// "report" over the one of pools v1 and v1b (a job v1 cannot run by v2's
// timing, so v1 skips the schedule). Once v2 leaves, no live pool defines
// the recorded definition: the leader's next pass records its own, owned
// by the most recently started live pool defining it so, the conflict ends
// and the schedule ticks again. A takeover against a record read before it
// changed writes nothing.
func TestScheduleTakenOverWhenNewerPoolsLeave(t *testing.T) {
	f := newFixture(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	old := reportSchedule("@every 1h0m0s", hourlyAtHalf, "old-job")
	cur := reportSchedule("@every 5m0s", every5m, "new-job")
	pool := func(id string, started time.Time, p Periodic) *Leader {
		t.Helper()
		cfg := f.config()
		cfg.WorkerID, cfg.Started, cfg.Periodic = id, started, []Periodic{p}
		if err := f.ledger.Heartbeat(f.ctx, jobs.PoolInfo{ID: id, Started: started, Schedules: []string{p.Spec.ID},
			ScheduleDigests: map[string]string{p.Spec.ID: p.Spec.Digest}}, time.Minute); err != nil {
			t.Fatal(err)
		}
		return f.leader(cfg)
	}
	v1 := pool("pool-v1", t0, old)
	pool("pool-v1b", t0.Add(30*time.Second), old)
	v2 := pool("pool-v2", t0.Add(time.Minute), cur)
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
	pass(v1)
	pass(v2)
	pass(v1) // pool-v2 is live: its definition stays, pool-v1 skips
	s := read()
	if s.Owner.Pool != "pool-v2" || s.Conflict == nil || s.Conflict.Pool != "pool-v1" {
		t.Fatalf("while pool-v2 is live: recorded by %+v, conflict %+v", s.Owner, s.Conflict)
	}
	if n := testutil.ToFloat64(f.metrics.ScheduleConflicts); n != 1 {
		t.Fatalf("fencedq_schedule_conflicts %v while pool-v2 is live, want 1", n)
	}

	if err := f.ledger.Leave(f.ctx, "pool-v2"); err != nil {
		t.Fatal(err)
	}
	pass(v1)
	s = read()
	if s.Digest != old.Spec.Digest || s.Schedule != "@every 1h0m0s" || s.JobDigest != "old-job" {
		t.Fatalf("after pool-v2 left: %q (%s) recorded, want the live pools' definition", s.Schedule, s.Digest)
	}
	if s.Owner.Pool != "pool-v1b" || !s.Owner.Started.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("owner %+v, want pool-v1b, the newest live pool defining it", s.Owner)
	}
	if s.Conflict != nil {
		t.Fatalf("conflict still recorded after pool-v2 left: %+v", s.Conflict)
	}
	if n := testutil.ToFloat64(f.metrics.ScheduleConflicts); n != 0 {
		t.Fatalf("fencedq_schedule_conflicts %v after pool-v2 left, want 0", n)
	}
	if next := s.NextTick.UTC(); next.Minute() != 30 || next.Nanosecond() != int(time.Millisecond) {
		t.Fatalf("next tick %v, want half past an hour (pool-v1's definition)", next)
	}
	if !strings.Contains(f.logs.String(), "periodic schedule definition taken over") {
		t.Fatalf("the takeover was not logged:\n%s", f.logs.String())
	}

	// A stale takeover (v2's record as read before) is refused.
	stale := *s
	stale.Digest, stale.Owner = cur.Spec.Digest, jobs.ScheduleOwner{Pool: "pool-v2", Started: t0.Add(time.Minute)}
	tok++
	got, err := f.ledger.TakeOverSchedule(f.ctx, tok, cur.Spec, jobs.ScheduleOwner{Pool: "x", Started: t0}, &stale, time.Time{})
	if err != nil || got != nil {
		t.Fatalf("stale takeover: %+v, %v; want nothing written", got, err)
	}
	if s := read(); s.Digest != old.Spec.Digest {
		t.Fatalf("a stale takeover recorded %s", s.Digest)
	}
}
