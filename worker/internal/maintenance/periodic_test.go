package maintenance

import (
	"slices"
	"testing"
	"time"
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
			due, skipped, next, handled := (&Services{}).dueTicks(p, cursor, now)
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
	due, skipped, _, _ := (&Services{}).dueTicks(p, cursor, cursor.Add(time.Minute+500*time.Millisecond))
	if len(due) != 1 || !due[0].Equal(cursor.Add(time.Minute)) || skipped != 0 {
		t.Fatalf("due %v, skipped %d; want the 12:01 tick, none skipped", due, skipped)
	}
	due, skipped, _, handled := (&Services{}).dueTicks(p, cursor, cursor.Add(59*time.Second))
	if len(due) != 0 || skipped != 0 || !handled.IsZero() {
		t.Fatalf("before the first tick: due %v, skipped %d, handled %v", due, skipped, handled)
	}
}
