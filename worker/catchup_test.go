package worker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// fixedTicks is a schedule with a fixed list of ticks, oldest first.
type fixedTicks []time.Time

func (f fixedTicks) Next(t time.Time) time.Time {
	for _, tk := range f {
		if tk.After(t) {
			return tk
		}
	}
	return time.Time{}
}

func (f fixedTicks) String() string { return "fixed ticks" }

type catchUpArgs struct{}

func (catchUpArgs) Kind() string { return "catch-up-tick" }

// TestCatchUpNoneMissedAfter: a schedule registered an hour ago whose
// leader was down since missed three ticks, 30 minutes, 2 minutes and 1
// second ago. Under CatchUpNone with MissedAfter(10 minutes) the first
// pass enqueues the two ticks later by less than 10 minutes and skips the
// older one (CatchUpLatest would enqueue one tick, CatchUpAll three, and
// the default MissedAfter of a minute one).
func TestCatchUpNoneMissedAfter(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	now, err := e.ledger.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Truncate(time.Second)
	old, recent, latest := now.Add(-30*time.Minute), now.Add(-2*time.Minute), now.Add(-time.Second)
	const id = "catch-up-none"

	// The downtime: the schedule was registered an hour ago (by an earlier
	// leader, token 0) and nothing ran since. No tick before a schedule's
	// creation is due, so its creation time is moved back in its record.
	spec := jobs.ScheduleSpec{ID: id, Schedule: fixedTicks(nil).String(), TimeZone: "UTC", Kind: catchUpArgs{}.Kind(),
		Queue: jobs.DefaultQueue, CatchUp: string(worker.CatchUpNone)}
	if _, err := e.ledger.RegisterSchedule(ctx, 0, spec); err != nil {
		t.Fatal(err)
	}
	key := e.ns + ":{periodic}:schedule:" + id
	if err := e.rdb.HSet(ctx, key, "created", now.Add(-time.Hour).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := e.ledger.Schedule(ctx, id); err != nil || !s.Created.Equal(now.Add(-time.Hour)) {
		t.Fatalf("schedule %+v (%v): want it created an hour ago", s, err)
	}

	p := e.pool(e.config())
	ran := make(chan string, 8)
	if err := worker.Register(p, jobs.WorkFunc[catchUpArgs](func(_ context.Context, j *jobs.Job[catchUpArgs]) error {
		ran <- j.OperationID
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(fixedTicks{old, recent, latest}, catchUpArgs{}, worker.ScheduleID(id),
		worker.WithCatchUp(worker.CatchUpNone), worker.MissedAfter(10*time.Minute))); err != nil {
		t.Fatal(err)
	}
	e.start(p)

	var got []string
	for len(got) < 2 {
		select {
		case op := <-ran:
			got = append(got, op)
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("ticks run: %v; want the two within MissedAfter", got)
		}
	}
	slices.Sort(got)
	want := []string{jobs.PeriodicOperationID(id, recent), jobs.PeriodicOperationID(id, latest)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ticks run %v, want %v", got, want)
	}
	// The ticks of one pass are enqueued in one call, oldest first: the
	// older tick would have been enqueued with them.
	if r, err := e.ledger.FindByOperation(ctx, jobs.PeriodicOperationID(id, old)); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("the tick later than MissedAfter was enqueued: %+v, %v", r, err)
	}

	var s *jobs.Schedule
	redistest.Await(t, e.rdb, key, "the pass recorded in the schedule", func() bool {
		s, err = e.ledger.Schedule(ctx, id)
		return err == nil && s.Cursor.Equal(latest)
	})
	if s.Enqueued != 2 || s.Skipped != 1 || !s.LastTick.Equal(latest) || s.CatchUp != string(worker.CatchUpNone) {
		t.Fatalf("schedule %+v: want 2 ticks enqueued, 1 skipped, the last at %v", s, latest)
	}
	select {
	case op := <-ran:
		t.Fatalf("another tick ran: %s", op)
	default:
	}
}

// stepTicks ticks every step from start to end (inclusive), computed
// rather than listed, so a week of seconds costs nothing to walk.
type stepTicks struct {
	start, end time.Time
	step       time.Duration
}

func (s stepTicks) Next(t time.Time) time.Time {
	n := s.start
	if !t.Before(s.start) {
		n = s.start.Add((t.Sub(s.start)/s.step + 1) * s.step)
	}
	if n.After(s.end) {
		return time.Time{}
	}
	return n
}

func (s stepTicks) String() string { return "step ticks" }

// catchUpBound registers schedule id (ticks, created before them, under
// CatchUpAll, on a queue no pool serves), runs a pool until the schedule's
// cursor reaches end, and returns the schedule as recorded.
func catchUpBound(t *testing.T, id string, ticks stepTicks, opts ...worker.PeriodicOption) (*env, *jobs.Schedule) {
	t.Helper()
	e := newEnv(t)
	ctx := t.Context()
	const queue = "catch-up-bound"
	spec := jobs.ScheduleSpec{ID: id, Schedule: ticks.String(), TimeZone: "UTC", Kind: catchUpArgs{}.Kind(),
		Queue: queue, CatchUp: string(worker.CatchUpAll)}
	if _, err := e.ledger.RegisterSchedule(ctx, 0, spec); err != nil {
		t.Fatal(err)
	}
	key := e.ns + ":{periodic}:schedule:" + id
	if err := e.rdb.HSet(ctx, key, "created", ticks.start.Add(-time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	p := e.pool(e.config())
	opts = append([]worker.PeriodicOption{worker.ScheduleID(id), worker.WithCatchUp(worker.CatchUpAll),
		worker.EnqueueOptions(jobs.Queue(queue))}, opts...)
	if err := p.AddPeriodic(worker.Periodic(ticks, catchUpArgs{}, opts...)); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	var s *jobs.Schedule
	var err error
	redistest.Await(t, e.rdb, key, "the catch-up recorded up to the last tick", func() bool {
		s, err = e.ledger.Schedule(ctx, id)
		return err == nil && s.Cursor.Equal(ticks.end)
	})
	return e, s
}

// TestCatchUpAllIsBounded: a schedule every second whose leader was down
// for a week under CatchUpAll enqueues only the newest DefaultMaxCatchUp
// missed ticks (in batches), and counts the rest as skipped, rather than
// 604 800 jobs in one pass.
func TestCatchUpAllIsBounded(t *testing.T) {
	e0 := newEnv(t)
	now, err := e0.ledger.ServerTime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	end := now.Truncate(time.Second).Add(-time.Second)
	const missed = 7 * 24 * 3600
	ticks := stepTicks{start: end.Add(-(missed - 1) * time.Second), end: end, step: time.Second}
	const id = "catch-up-week"
	e, s := catchUpBound(t, id, ticks)
	ctx := t.Context()
	if s.Enqueued != worker.DefaultMaxCatchUp || s.Skipped != missed-worker.DefaultMaxCatchUp || !s.LastTick.Equal(end) {
		t.Fatalf("schedule %+v: want %d ticks enqueued, %d skipped, the last at %v",
			s, worker.DefaultMaxCatchUp, missed-worker.DefaultMaxCatchUp, end)
	}
	oldest := end.Add(-(worker.DefaultMaxCatchUp - 1) * time.Second)
	if _, err := e.ledger.FindByOperation(ctx, jobs.PeriodicOperationID(id, oldest)); err != nil {
		t.Fatalf("the oldest tick kept (%v) was not enqueued: %v", oldest, err)
	}
	if r, err := e.ledger.FindByOperation(ctx, jobs.PeriodicOperationID(id, oldest.Add(-time.Second))); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a tick beyond the bound was enqueued: %+v, %v", r, err)
	}
}

// TestMaxCatchUp: MaxCatchUp sets the bound (a catch-up just above it
// enqueues the newest n), and AddPeriodic refuses one out of range.
func TestMaxCatchUp(t *testing.T) {
	e0 := newEnv(t)
	now, err := e0.ledger.ServerTime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	end := now.Truncate(time.Minute).Add(-time.Minute)
	ticks := stepTicks{start: end.Add(-249 * time.Minute), end: end, step: time.Minute} // 250 ticks
	_, s := catchUpBound(t, "catch-up-30", ticks, worker.MaxCatchUp(30))
	if s.Enqueued != 30 || s.Skipped != 220 || !s.LastTick.Equal(end) || s.MaxCatchUp != 30 {
		t.Fatalf("schedule %+v: want 30 ticks enqueued, 220 skipped, max catch-up 30 recorded", s)
	}

	p := e0.pool(e0.config())
	for _, n := range []int{0, -1, worker.MaxMaxCatchUp + 1} {
		err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), catchUpArgs{}, worker.MaxCatchUp(n)))
		if !errors.Is(err, worker.ErrSchedule) {
			t.Errorf("MaxCatchUp(%d): %v, want ErrSchedule", n, err)
		}
	}
}
