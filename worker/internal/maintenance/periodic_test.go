package maintenance

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// everyMinute ticks on the minute.
func everyMinute(t time.Time) time.Time { return t.UTC().Truncate(time.Minute).Add(time.Minute) }

// TestDueTicksCatchUpNone: under CatchUpNone a missed tick is enqueued
// while it is at most MissedAfter late and skipped once it is later; the
// cursor moves past the skipped ticks too.
func TestDueTicksCatchUpNone(t *testing.T) {
	cursor := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := cursor.Add(10*time.Minute + 30*time.Second) // ticks 12:01 .. 12:10 have passed
	at := func(min int) time.Time { return cursor.Add(time.Duration(min) * time.Minute) }
	for _, c := range []struct {
		name        string
		missedAfter time.Duration
		due         []time.Time
	}{
		// 12:10 is 30s late, 12:09 90s late, 12:08 150s late.
		{"within the bound only the latest", time.Minute, []time.Time{at(10)}},
		{"a tick exactly MissedAfter late is on time", 90 * time.Second, []time.Time{at(9), at(10)}},
		{"one nanosecond less and it is missed", 90*time.Second - time.Nanosecond, []time.Time{at(10)}},
		{"a wide bound keeps the recent ones", 3 * time.Minute, []time.Time{at(8), at(9), at(10)}},
		{"a bound shorter than any lateness skips all", 10 * time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Periodic{Next: everyMinute, MissedAfter: c.missedAfter}
			p.Spec.CatchUp = CatchUpNone
			due, skipped, _, next, handled, err := dueTicks(p, cursor, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(due, c.due) {
				t.Errorf("due %v, want %v", due, c.due)
			}
			if want := 10 - len(c.due); skipped != want {
				t.Errorf("skipped %d, want %d", skipped, want)
			}
			if !handled.Equal(at(10)) || !next.Equal(at(11)) {
				t.Errorf("handled %v, next %v; want %v, %v", handled, next, at(10), at(11))
			}
		})
	}
}

// TestDueTicksCatchUpNoneOnTime: a schedule that is not behind enqueues its
// tick however short MissedAfter is, as long as the pass comes within it.
func TestDueTicksCatchUpNoneOnTime(t *testing.T) {
	cursor := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := Periodic{Next: everyMinute, MissedAfter: time.Second}
	p.Spec.CatchUp = CatchUpNone
	due, skipped, _, _, _, err := dueTicks(p, cursor, cursor.Add(time.Minute+500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || !due[0].Equal(cursor.Add(time.Minute)) || skipped != 0 {
		t.Fatalf("due %v, skipped %d; want the 12:01 tick, none skipped", due, skipped)
	}
	due, skipped, _, _, handled, err := dueTicks(p, cursor, cursor.Add(59*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 0 || skipped != 0 || !handled.IsZero() {
		t.Fatalf("before the first tick: due %v, skipped %d, handled %v", due, skipped, handled)
	}
}

type tickArgs struct{}

func (tickArgs) Kind() string { return "tick" }

// every10ms ticks on every 10 ms boundary.
func every10ms(t time.Time) time.Time {
	return t.UTC().Truncate(10 * time.Millisecond).Add(10 * time.Millisecond)
}

func tickSchedule(id, queue string) Periodic {
	return Periodic{
		Spec: jobs.ScheduleSpec{ID: id, Schedule: "@every 10ms", TimeZone: "UTC", Kind: "tick", Queue: queue,
			CatchUp: CatchUpAll},
		Next: every10ms, Args: tickArgs{}, Options: []jobs.Option{jobs.Queue(queue)},
	}
}

// TestPeriodicPass: the first pass registers the schedules (a new schedule
// has no past ticks) and records their next tick; once that tick has
// passed, a pass enqueues every due tick, each as one job with the tick's
// operation id, and records them. A schedule whose ticks cannot be
// enqueued is logged and counted without stopping the other; a deposed
// leader's pass is refused.
func TestPeriodicPass(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.Periodic = []Periodic{tickSchedule("ticks", "ticks"), tickSchedule("broken", "bad queue{}")}
	l := f.leader(cfg)
	leader := f.lead("pool-a")

	if err := l.periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	sched, err := f.ledger.Schedule(f.ctx, "ticks")
	if err != nil {
		t.Fatal(err)
	}
	if sched.Created.IsZero() || sched.NextTick.IsZero() || sched.NextTick.Before(sched.Created) {
		t.Fatalf("registered schedule %+v: want its creation and a next tick after it", sched)
	}
	// The clock must pass both schedules' next ticks for them to be due
	// (Redis's clock and this process's are the same machine's); the
	// broken one was registered after the first, by as long as its pass.
	broken, err := f.ledger.Schedule(f.ctx, "broken")
	if err != nil {
		t.Fatal(err)
	}
	last := sched.NextTick
	if broken.NextTick.After(last) {
		last = broken.NextTick
	}
	time.Sleep(time.Until(last) + 10*time.Millisecond)

	if err := l.periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatalf("one broken schedule failed the pass: %v", err)
	}
	sched, err = f.ledger.Schedule(f.ctx, "ticks")
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := f.ledger.ScheduleTicks(f.ctx, "ticks", 100)
	if err != nil {
		t.Fatal(err)
	}
	// every 10 ms ticks since the schedule's creation, of which the
	// ledger keeps the newest 100 (a slow first pass makes more)
	if sched.Enqueued < 1 || int64(len(ticks)) != min(sched.Enqueued, 100) || !sched.Cursor.Equal(sched.LastTick) {
		t.Fatalf("after the tick passed: %+v with %d ticks recorded", sched, len(ticks))
	}
	for _, tk := range ticks {
		rec, err := f.ledger.Get(f.ctx, "ticks", tk.JobID)
		if err != nil || rec.OperationID != tk.OperationID("ticks") || rec.Kind != "tick" {
			t.Fatalf("tick %v's job: %+v, %v; want operation id %s", tk.Time, rec, err, tk.OperationID("ticks"))
		}
	}
	if n := f.rdb.ZCard(f.ctx, f.ledger.StateKey("ticks", jobs.Pending)).Val(); n != sched.Enqueued {
		t.Fatalf("%d jobs pending for %d ticks", n, sched.Enqueued)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServicePeriodic)); v != 1 {
		t.Fatalf("periodic errors %v, want 1 (the broken schedule)", v)
	}
	if !f.logged("periodic schedule pass failed", `"schedule":"broken"`, `"service":"periodic"`) {
		t.Fatal("the broken schedule was not logged")
	}

	if err := l.periodic.runOnce(f.ctx, leader-1); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("a pass under an older token: %v, want jobs.ErrStale", err)
	}
}

// TestPeriodicSubMillisecondTicksHandledOnce: the ledger keeps a schedule's
// cursor in milliseconds. A schedule whose ticks fall between two
// milliseconds (half a millisecond after each second) must still have each
// tick handled once: a pass after the tick was recorded enqueues nothing
// and records nothing more, and the recorded tick's operation id is its
// job's.
func TestPeriodicSubMillisecondTicksHandledOnce(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	const off = 500 * time.Microsecond // ticks half a millisecond after each second
	p := tickSchedule("odd", "odd")
	p.Spec.CatchUp = CatchUpLatest
	p.Next = func(t time.Time) time.Time { return t.UTC().Add(-off).Truncate(time.Second).Add(time.Second + off) }
	cfg.Periodic = []Periodic{p}
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	if err := l.periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	sched, err := f.ledger.Schedule(f.ctx, "odd")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(sched.NextTick) + 20*time.Millisecond)
	if err := l.periodic.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	first, err := f.ledger.Schedule(f.ctx, "odd")
	if err != nil {
		t.Fatal(err)
	}
	if first.Enqueued != 1 {
		t.Fatalf("after the first tick: %d enqueued, want 1", first.Enqueued)
	}
	// The next tick is about a second away: these passes find nothing due.
	for range 3 {
		if err := l.periodic.runOnce(f.ctx, leader); err != nil {
			t.Fatal(err)
		}
	}
	after, err := f.ledger.Schedule(f.ctx, "odd")
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := f.ledger.ScheduleTicks(f.ctx, "odd", 100)
	if err != nil {
		t.Fatal(err)
	}
	if after.Enqueued != 1 || len(ticks) != 1 {
		t.Fatalf("passes before the next tick enqueued the last one again: %d enqueued, ticks %+v", after.Enqueued, ticks)
	}
	rec, err := f.ledger.Get(f.ctx, "odd", ticks[0].JobID)
	if err != nil || rec.OperationID != ticks[0].OperationID("odd") {
		t.Fatalf("tick %v recorded job %s with operation id %q; the record says %q (%v)", ticks[0].Time, ticks[0].JobID,
			rec.OperationID, ticks[0].OperationID("odd"), err)
	}
}

// TestNewScheduleDoesNotCatchUpOnTheClockOffset: ticks are due by the
// namespace's time, which after a failover to a node whose clock is
// behind runs ahead of that node's TIME (the tenure's offset). A schedule
// first registered then is new: no tick before its registration is
// enqueued, however far behind the node's clock is.
func TestNewScheduleDoesNotCatchUpOnTheClockOffset(t *testing.T) {
	f := newFixture(t)
	// This node is a new tenure whose clock is 10 minutes behind the
	// old primary's, whose last time the record holds.
	tm, err := f.rdb.Time(f.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	f.rdb.HSet(f.ctx, epoch.Key(f.ns), "clk", tm.Add(10*time.Minute).UnixMicro(), "crid", "old-primary", "coff", 0)
	now, err := f.ledger.ServerTime(f.ctx)
	if err != nil || now.Sub(tm) < 9*time.Minute {
		t.Fatalf("the namespace's time %v (%v), want 10 minutes past TIME %v", now, err, tm)
	}

	cfg := f.config()
	cfg.Periodic = []Periodic{{
		Spec: jobs.ScheduleSpec{ID: "minutely", Schedule: "@every 1m0s", TimeZone: "UTC", Kind: "tick", Queue: "minutely",
			CatchUp: CatchUpAll},
		Next: everyMinute, Args: tickArgs{}, Options: []jobs.Option{jobs.Queue("minutely")},
	}}
	l := f.leader(cfg)
	if err := l.periodic.runOnce(f.ctx, f.lead("pool-a")); err != nil {
		t.Fatal(err)
	}
	sched, err := f.ledger.Schedule(f.ctx, "minutely")
	if err != nil {
		t.Fatal(err)
	}
	if sched.Enqueued != 0 || !sched.NextTick.After(now) {
		t.Fatalf("a new schedule's first pass: %d ticks enqueued, next tick %v (the namespace's time %v, created %v)",
			sched.Enqueued, sched.NextTick, now, sched.Created)
	}
}

// TestDueTicksMaxCatchUpAcrossWalks: more missed ticks than one walk
// covers (maxScan) still end with the newest MaxCatchUp enqueued, even
// when fewer than MaxCatchUp of them lie beyond the first walk: a walk
// stopped short keeps its newest ticks for the next one.
func TestDueTicksMaxCatchUpAcrossWalks(t *testing.T) {
	everySecond := func(t time.Time) time.Time { return t.UTC().Truncate(time.Second).Add(time.Second) }
	cursor := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, missed := range []int{maxScan + 50, 3*maxScan + 7, 250} {
		p := Periodic{Next: everySecond, MaxCatchUp: 100}
		p.Spec.CatchUp = CatchUpAll
		now := cursor.Add(time.Duration(missed) * time.Second)
		var due []time.Time
		skipped, beyond, c := 0, 0, cursor
		for walks := 0; ; walks++ {
			if walks > 10 {
				t.Fatalf("%d missed: no end after %d walks", missed, walks)
			}
			d, s, b, next, handled, err := dueTicks(p, c, now)
			if err != nil {
				t.Fatal(err)
			}
			due, skipped, beyond = append(due, d...), skipped+s, beyond+b
			if next.After(now) || next.IsZero() {
				break
			}
			c = handled
		}
		if len(due) != 100 || !due[0].Equal(now.Add(-99*time.Second)) || !due[99].Equal(now) ||
			skipped != missed-100 || beyond != missed-100 {
			t.Errorf("%d missed: %d due (%v .. ), skipped %d, beyond %d; want the newest 100, %d skipped",
				missed, len(due), due[:min(1, len(due))], skipped, beyond, missed-100)
		}
	}
}
