package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A schedule's record is on the namespace's time, the clock the scheduler
// pass reads and the dashboard measures its age by: after Redis's clock
// stepped 10 minutes back (a failover to a node whose clock is behind), a
// registration's Seen, a tick record's and a removal's times are the
// namespace's time, not the node's TIME (which made every schedule look unregistered for 10
// minutes).
func TestScheduleRecordIsOnTheNamespacesTime(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	before, err := l.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(-10 * time.Minute)
	now, err := l.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(before) {
		t.Fatalf("the namespace's time went back with the clock: %v after %v", now, before)
	}
	near := func(what string, got time.Time) {
		t.Helper()
		if d := got.Sub(now); d < -time.Second || d > time.Second {
			t.Errorf("%s %v is %v from the pass's time %v", what, got, d, now)
		}
	}
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "default", CatchUp: "latest"}
	if _, err := l.RegisterScheduleAt(ctx, 10, spec, ledger.ScheduleOwner{}, now); err != nil {
		t.Fatal(err)
	}
	tick := now.Truncate(time.Minute)
	if err := l.RecordTicks(ctx, "nightly", 10, ledger.TickRecord{At: now, Cursor: tick,
		Ticks: []jobs.Tick{{Time: tick, JobID: "j1", Queue: "default"}}}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Schedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	near("created", s.Created)
	near("seen", s.Seen)
	near("updated", s.Updated)
	ticks, err := l.ScheduleTicks(ctx, "nightly", 1)
	if err != nil || len(ticks) != 1 {
		t.Fatalf("ticks %v, %v", ticks, err)
	}
	near("tick recorded", ticks[0].Recorded)
	if ok, err := l.RemoveSchedule(ctx, "nightly", "ops", "retired"); err != nil || !ok {
		t.Fatalf("remove: %v, %v", ok, err)
	}
	rs, err := l.ScheduleRemovals(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("removals %v, %v", rs, err)
	}
	near("removed", rs[0].At)
}
