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
