package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A schedule whose tick counts were edited by hand into something else
// than a whole number ("abc", "1.5", digits beyond 2^63) records its
// scheduler passes all the same: the counts read as 0 and go on from
// there. Redis's HINCRBY failed on them after the pass's ticks were
// appended, so every pass failed, appended its ticks again and never
// moved the schedule's cursor.
func TestCorruptScheduleCountsFailNoPass(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	for i, bad := range []string{"abc", "1.5", "99999999999999999999", ""} {
		id := "nightly-" + string(rune('a'+i))
		if _, err := l.RegisterSchedule(ctx, 10, jobs.ScheduleSpec{ID: id, Schedule: "0 2 * * *", Kind: "report", Queue: "default"}); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, ns+":{periodic}:schedule:"+id, "enqueued", bad, "skipped", bad)
		tick := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
		if err := l.RecordTicks(ctx, id, 10, ledger.TickRecord{
			Ticks: []jobs.Tick{{Time: tick, JobID: "job-1", Queue: "default"}}, Cursor: tick, Skipped: 2}); err != nil {
			t.Errorf("counts %q: record ticks: %v", bad, err)
		}
		s, err := l.Schedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ticks, err := l.ScheduleTicks(ctx, id, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Cursor.Equal(tick) || s.Enqueued < 1 || s.Skipped < 2 || len(ticks) != 1 {
			t.Errorf("counts %q: cursor %v, enqueued %d, skipped %d, %d ticks; want the cursor at the tick, counted, one tick",
				bad, s.Cursor, s.Enqueued, s.Skipped, len(ticks))
		}
	}
}
