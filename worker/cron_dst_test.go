package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestCronAcrossDaylightSaving: a daily time the clocks repeat (fall back)
// ticks once, a daily time the clocks skip (spring forward) ticks at the
// change, as cron does; wildcard hours keep ticking by the real clock.
func TestCronAcrossDaylightSaving(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	perDay := func(s worker.Schedule, from time.Time) map[string]int {
		out := map[string]int{}
		for tk := s.Next(from); tk.Before(from.Add(72 * time.Hour)); tk = s.Next(tk) {
			out[tk.In(paris).Format("01-02")]++
		}
		return out
	}
	autumn := time.Date(2024, 10, 25, 22, 0, 0, 0, time.UTC) // the clocks go back on 10-27, 03:00 → 02:00
	spring := time.Date(2024, 3, 29, 23, 0, 0, 0, time.UTC)  // and forward on 03-31, 02:00 → 03:00
	for _, c := range []struct {
		expr string
		from time.Time
		day  string
		want int
		at   time.Time // the tick on day, when want is 1
	}{
		{"CRON_TZ=Europe/Paris 30 2 * * *", autumn, "10-27", 1, time.Date(2024, 10, 27, 0, 30, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 0 0 2 * * *", autumn, "10-27", 1, time.Date(2024, 10, 27, 0, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 30 2 * * *", spring, "03-31", 1, time.Date(2024, 3, 31, 1, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 30 1 * * *", spring, "03-31", 1, time.Date(2024, 3, 31, 0, 30, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 0 * * * *", autumn, "10-27", 25, time.Time{}},
		{"CRON_TZ=Europe/Paris 0 * * * *", spring, "03-31", 23, time.Time{}},
		// a step names fixed times: 02:00 ticks once in autumn, at 03:00 in spring
		{"CRON_TZ=Europe/Paris 0 */2 * * *", autumn, "10-27", 12, time.Time{}},
		{"CRON_TZ=Europe/Paris 0 */2 * * *", spring, "03-31", 12, time.Time{}},
	} {
		s := worker.Cron(c.expr)
		got := perDay(s, c.from)
		if got[c.day] != c.want {
			t.Errorf("%s: %d ticks on %s, want %d (%v)", c.expr, got[c.day], c.day, c.want, got)
		}
		for d, n := range got {
			if d != c.day && n != 1 && c.want == 1 {
				t.Errorf("%s: %d ticks on %s, want 1", c.expr, n, d)
			}
		}
		if !c.at.IsZero() {
			tk := s.Next(c.at.Add(-time.Hour))
			if !tk.Equal(c.at) {
				t.Errorf("%s: tick on %s at %s, want %s", c.expr, c.day, tk.UTC(), c.at)
			}
		}
	}
}

// TestCronRepeatedMinuteTicksOnce: every 5 seconds of 02:30 ticks 12 times
// on the day the clocks go back, not 24.
func TestCronRepeatedMinuteTicksOnce(t *testing.T) {
	if _, err := time.LoadLocation("Europe/Paris"); err != nil {
		t.Skip(err)
	}
	s := worker.Cron("CRON_TZ=Europe/Paris */5 30 2 27 10 *")
	from := time.Date(2024, 10, 26, 22, 0, 0, 0, time.UTC)
	n := 0
	for tk := s.Next(from); !tk.IsZero() && tk.Before(from.Add(24*time.Hour)); tk = s.Next(tk) {
		n++
	}
	if n != 12 {
		t.Fatalf("%d ticks, want 12", n)
	}
}

type dailyArgs struct{}

func (dailyArgs) Kind() string { return "daily-report" }

// TestCronTicksDailyWhereClocksChangeByHalfAnHour: on Lord Howe Island
// the clocks change by 30 minutes. A pool whose leader was down since
// before the island's last clock change catches up (CatchUpAll) on a
// daily 03:00 that ticks once every day, the day of the change included
// (the cron library, walking the zone's clock an hour at a time, missed
// it), and a sweep of every quarter hour of a year in zones changing by
// 30 minutes, 1 hour and 2 hours finds one tick per day.
func TestCronTicksDailyWhereClocksChangeByHalfAnHour(t *testing.T) {
	zones := map[string]*time.Location{}
	for _, z := range []string{"Australia/Lord_Howe", "Pacific/Chatham", "Antarctica/Troll", "America/Havana"} {
		loc, err := time.LoadLocation(z)
		if err != nil {
			t.Skip(err)
		}
		zones[z] = loc
	}
	for z, loc := range zones {
		from, end := time.Date(2024, 1, 1, 12, 0, 0, 0, loc), time.Date(2025, 1, 1, 12, 0, 0, 0, loc)
		for mins := 0; mins < 24*60; mins += 15 {
			expr := fmt.Sprintf("CRON_TZ=%s %d %d * * *", z, mins%60, mins/60)
			days := map[string]int{}
			for tk := worker.Cron(expr).Next(from); !tk.IsZero() && tk.Before(end); tk = worker.Cron(expr).Next(tk) {
				days[tk.In(loc).Format("2006-01-02")]++
			}
			for d := from.AddDate(0, 0, 1); d.Before(end); d = d.AddDate(0, 0, 1) {
				if n := days[d.Format("2006-01-02")]; n != 1 {
					t.Errorf("%s: %d ticks on %s, want 1", expr, n, d.Format("2006-01-02"))
				}
			}
		}
	}

	e := newEnv(t)
	ctx := t.Context()
	now, err := e.ledger.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loc := zones["Australia/Lord_Howe"]
	// The island's last clock change before now, and the day before it.
	start, _ := now.In(loc).ZoneBounds()
	created := time.Date(start.In(loc).Year(), start.In(loc).Month(), start.In(loc).Day()-1, 12, 0, 0, 0, loc)
	var want []string // 03:00 is never skipped nor repeated there
	var last time.Time
	for d := created.AddDate(0, 0, 1); ; d = d.AddDate(0, 0, 1) {
		tk := time.Date(d.Year(), d.Month(), d.Day(), 3, 0, 0, 0, loc)
		if tk.After(now) {
			break
		}
		want, last = append(want, jobs.PeriodicOperationID("lord-howe-daily", tk)), tk
	}
	const expr = "CRON_TZ=Australia/Lord_Howe 0 3 * * *"
	const id = "lord-howe-daily"
	spec := jobs.ScheduleSpec{ID: id, Schedule: expr, TimeZone: "Australia/Lord_Howe", Kind: dailyArgs{}.Kind(),
		Queue: jobs.DefaultQueue, CatchUp: string(worker.CatchUpAll)}
	if _, err := e.ledger.RegisterSchedule(ctx, 0, spec); err != nil {
		t.Fatal(err)
	}
	key := e.ns + ":{periodic}:schedule:" + id
	if err := e.rdb.HSet(ctx, key, "created", created.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.WorkFunc[dailyArgs](func(context.Context, *jobs.Job[dailyArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Cron(expr), dailyArgs{}, worker.ScheduleID(id),
		worker.WithCatchUp(worker.CatchUpAll))); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	var s *jobs.Schedule
	redistest.Await(t, e.rdb, key, "the missed days caught up", func() bool {
		s, err = e.ledger.Schedule(ctx, id)
		return err == nil && !s.LastTick.Before(last)
	})
	for _, op := range want {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("tick %s: %v", op, err)
		}
	}
	if s.Enqueued != int64(len(want)) || s.Skipped != 0 {
		t.Fatalf("schedule %+v: want %d ticks enqueued (one a day since %s), none skipped", s, len(want), created)
	}
}

// TestCronFromTheRepeatedHourSecondPass: from a time in the second pass of
// the hour the clocks repeat, a schedule of many fixed times in that hour
// ("*/5 2 * * *") ticks the next day: its times in the hour ticked at
// their first occurrence. (The walk gave up after eight of them: no next
// tick, so a schedule first registered then never ticked.)
func TestCronFromTheRepeatedHourSecondPass(t *testing.T) {
	for _, c := range []struct {
		expr     string
		from     time.Time // in the second pass of the repeated hour
		want     time.Time
		wantZone string
	}{
		// Berlin repeats 02:00-03:00 on 2024-10-27: 01:10 UTC is 02:10 CET
		{"CRON_TZ=Europe/Berlin */5 2 * * *", time.Date(2024, 10, 27, 1, 10, 0, 0, time.UTC), time.Date(2024, 10, 28, 1, 0, 0, 0, time.UTC), "Europe/Berlin"},
		{"CRON_TZ=Europe/Berlin 0-59 0-59 2 * * *", time.Date(2024, 10, 27, 1, 59, 0, 0, time.UTC), time.Date(2024, 10, 28, 1, 0, 0, 0, time.UTC), "Europe/Berlin"},
		// the times after the repeated hour still tick
		{"CRON_TZ=Europe/Berlin */5 2,3 * * *", time.Date(2024, 10, 27, 1, 10, 0, 0, time.UTC), time.Date(2024, 10, 27, 2, 0, 0, 0, time.UTC), "Europe/Berlin"},
		// New York repeats 01:00-02:00 on 2024-11-03: 06:10 UTC is 01:10 EST
		{"CRON_TZ=America/New_York */5 1 * * *", time.Date(2024, 11, 3, 6, 10, 0, 0, time.UTC), time.Date(2024, 11, 4, 6, 0, 0, 0, time.UTC), "America/New_York"},
	} {
		if _, err := time.LoadLocation(c.wantZone); err != nil {
			t.Skip(err)
		}
		if got := worker.Cron(c.expr).Next(c.from); !got.Equal(c.want) {
			t.Errorf("%s: next after %s is %s, want %s", c.expr, c.from, got.UTC(), c.want)
		}
	}
}

type repeatedHourArgs struct{}

func (repeatedHourArgs) Kind() string { return "repeated-hour-report" }

// TestScheduleCreatedInTheRepeatedHourTicks: a schedule first registered
// in the second pass of the hour the clocks repeat ticks afterwards (its
// latest missed tick caught up) instead of finding no next tick for ever.
func TestScheduleCreatedInTheRepeatedHourTicks(t *testing.T) {
	if _, err := time.LoadLocation("Europe/Berlin"); err != nil {
		t.Skip(err)
	}
	e := newEnv(t)
	ctx := t.Context()
	const id, expr = "repeated-hour", "CRON_TZ=Europe/Berlin */5 2 * * *"
	spec := jobs.ScheduleSpec{ID: id, Schedule: expr, TimeZone: "Europe/Berlin", Kind: repeatedHourArgs{}.Kind(),
		Queue: jobs.DefaultQueue, CatchUp: string(worker.CatchUpLatest)}
	if _, err := e.ledger.RegisterSchedule(ctx, 0, spec); err != nil {
		t.Fatal(err)
	}
	key := e.ns + ":{periodic}:schedule:" + id
	created := time.Date(2024, 10, 27, 1, 10, 0, 0, time.UTC) // 02:10 CET, the second pass
	if err := e.rdb.HSet(ctx, key, "created", created.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	p := e.pool(e.config())
	if err := p.AddPeriodic(worker.Periodic(worker.Cron(expr), repeatedHourArgs{}, worker.ScheduleID(id))); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	redistest.Await(t, e.rdb, key, "the latest missed tick enqueued", func() bool {
		s, err := e.ledger.Schedule(ctx, id)
		return err == nil && s.Enqueued == 1 && s.LastTick.After(created)
	})
}
