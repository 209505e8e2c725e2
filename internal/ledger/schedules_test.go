package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

func TestSchedulesFencedAndMonotonic(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "default", CatchUp: "latest"}

	if _, err := l.Schedule(ctx, "nightly"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
	if err := l.RecordTicks(ctx, "nightly", 5, ledger.TickRecord{}); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("ticks of an unregistered schedule: %v", err)
	}
	s, err := l.RegisterSchedule(ctx, 10, spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.ScheduleSpec != spec || s.Created.IsZero() || s.Leader != 10 {
		t.Fatalf("registered %+v", s)
	}
	t1 := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)
	if err := l.RecordTicks(ctx, "nightly", 10, ledger.TickRecord{
		Ticks:  []jobs.Tick{{Time: t1, JobID: "j1", Queue: "default"}, {Time: t2, JobID: "j2", Queue: "default", Deduplicated: true}},
		Cursor: t2, Skipped: 3, Next: t2.Add(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	// A newer leader registers; the older one is refused everywhere.
	if _, err := l.RegisterSchedule(ctx, 11, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RegisterSchedule(ctx, 10, spec); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("stale register: %v", err)
	}
	if err := l.RecordTicks(ctx, "nightly", lease.Token(10), ledger.TickRecord{Cursor: t2.Add(time.Hour)}); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("stale record: %v", err)
	}
	// A late record of an older tick does not move the cursor or the last tick back.
	if err := l.RecordTicks(ctx, "nightly", 11, ledger.TickRecord{Ticks: []jobs.Tick{{Time: t1, JobID: "j1", Queue: "default", Deduplicated: true}}, Cursor: t1}); err != nil {
		t.Fatal(err)
	}
	s, err = l.Schedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Cursor.Equal(t2) || !s.LastTick.Equal(t2) || s.LastJob != "j2" || s.Enqueued != 3 || s.Skipped != 3 ||
		!s.NextTick.Equal(t2.Add(24*time.Hour)) || s.Leader != 11 {
		t.Fatalf("schedule %+v", s)
	}
	ticks, err := l.ScheduleTicks(ctx, "nightly", 10)
	if err != nil || len(ticks) != 3 {
		t.Fatalf("ticks %v, %v", ticks, err)
	}
	if !ticks[0].Time.Equal(t1) || !ticks[1].Time.Equal(t2) || ticks[1].JobID != "j2" || !ticks[1].Deduplicated || ticks[2].Deduplicated {
		t.Fatalf("ticks %+v", ticks)
	}
	all, err := l.Schedules(ctx)
	if err != nil || len(all) != 1 || all[0].ID != "nightly" {
		t.Fatalf("schedules %v, %v", all, err)
	}
	if ok, err := l.RemoveSchedule(ctx, "nightly", "operator:test", ""); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if all, _ := l.Schedules(ctx); len(all) != 0 {
		t.Fatalf("after remove: %v", all)
	}
}

func TestPeriodicOperationID(t *testing.T) {
	tick := time.Date(2025, 3, 30, 1, 30, 0, 0, time.FixedZone("X", 3600))
	op := jobs.PeriodicOperationID("nightly", tick)
	if op != "periodic:nightly:2025-03-30T00:30:00Z" {
		t.Fatalf("op %q", op)
	}
	id, got, ok := jobs.ParsePeriodicOperationID(op)
	if !ok || id != "nightly" || !got.Equal(tick) {
		t.Fatalf("parsed %q %v %v", id, got, ok)
	}
	for _, bad := range []string{"nightly", "periodic:", "periodic:a b:2025-03-30T00:30:00Z", "periodic:x:yesterday"} {
		if _, _, ok := jobs.ParsePeriodicOperationID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if err := jobs.ValidateScheduleID("a:b"); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("a:b: %v", err)
	}
}

// TestScheduleDefinitionOrder: of two definitions of one schedule, the one
// registered by the most recently started pool is kept whatever the order
// of the registrations (equal starts: the greater digest); pools defining
// it alike leave the most recently started one as its owner; a record
// written without a digest is overwritten by the first with one.
func TestScheduleDefinitionOrder(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	t0 := time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC)
	tok := lease.Token(0)
	reg := func(id, digest, pool string, started time.Time) (*ledger.Schedule, error) {
		tok++
		return l.RegisterScheduleAt(ctx, tok, jobs.ScheduleSpec{ID: id, Schedule: digest, Kind: "k", Queue: "q", Digest: digest},
			ledger.ScheduleOwner{Pool: pool, Started: started}, time.Time{})
	}
	if _, err := l.RegisterSchedule(ctx, tok, jobs.ScheduleSpec{ID: "legacy", Schedule: "old"}); err != nil {
		t.Fatal(err)
	}
	if s, err := reg("legacy", "d1", "a", t0); err != nil || s.Digest != "d1" || s.Owner.Pool != "a" {
		t.Fatalf("a record without a digest: %+v, %v", s, err)
	}
	if _, err := reg("legacy", "d1", "b", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, err := reg("legacy", "d1", "a", t0); err != nil || s.Owner.Pool != "b" || !s.Owner.Started.Equal(t0.Add(time.Minute)) {
		t.Fatalf("alike definitions: owner %+v, %v; want the most recently started pool b", s.Owner, err)
	}
	for _, order := range [][2]string{{"dA", "dB"}, {"dB", "dA"}} {
		id := "tie-" + order[0]
		if _, err := reg(id, order[0], "p-"+order[0], t0); err != nil {
			t.Fatal(err)
		}
		s, err := reg(id, order[1], "p-"+order[1], t0)
		if order[1] == "dB" && (err != nil || s.Digest != "dB") {
			t.Fatalf("equal starts, greater digest second: %+v, %v", s, err)
		}
		if order[1] == "dA" && (!errors.Is(err, jobs.ErrScheduleConflict) || s.Digest != "dB" || s.Conflict == nil || s.Conflict.Pool != "p-dA") {
			t.Fatalf("equal starts, lesser digest second: %+v, %v", s, err)
		}
	}
}
