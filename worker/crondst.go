package worker

import (
	"time"

	"github.com/robfig/cron/v3"
)

// cronStar marks a cron field given as "*" (robfig/cron's starBit).
const cronStar = 1 << 63

// dstNext is s.Next(t) for a fixed time of day (its seconds, minutes and
// hours fields all without a wildcard) made to tick once a day across
// daylight-saving changes, as cron does: robfig/cron skips a time the
// clocks jump over (spring forward), which then ticks at the change, and
// ticks twice at a time the clocks repeat (fall back), whose second
// occurrence is skipped. Other schedules tick by the real clock.
func dstNext(s *cron.SpecSchedule, t time.Time) time.Time {
	if s.Second&cronStar != 0 || s.Minute&cronStar != 0 || s.Hour&cronStar != 0 {
		return s.Next(t)
	}
	loc := s.Location
	if loc == time.Local {
		loc = t.Location() // as robfig/cron reads it
	}
	for range 8 { // each turn passes a clock change
		n := s.Next(t)
		if n.IsZero() {
			return n
		}
		if g, ok := skippedTick(s, loc, t, n); ok {
			return g.In(n.Location())
		}
		end, repeated := repeatedTime(loc, n)
		if !repeated {
			return n
		}
		t = end.Add(-time.Nanosecond) // on from the end of the repeated times
	}
	return s.Next(t)
}

// skippedTick returns the first clock change after t and before n that
// jumps over a wall-clock time s names (a spring-forward gap), if any.
func skippedTick(s *cron.SpecSchedule, loc *time.Location, t, n time.Time) (time.Time, bool) {
	x := t.In(loc)
	for range 64 { // a schedule's ticks may be years apart
		_, end := x.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}, false
		}
		_, before := x.Zone()
		_, after := end.In(loc).Zone()
		if jump := time.Duration(after-before) * time.Second; jump > 0 {
			// the wall clock just before the change, read as UTC: the
			// skipped times are [wall, wall+jump)
			wall := time.Unix(end.Unix()+int64(before), 0).UTC()
			utc := *s
			utc.Location = time.UTC
			if m := utc.Next(wall.Add(-time.Second)); !m.IsZero() && m.Before(wall.Add(jump)) {
				return end, true
			}
		}
		x = end.In(loc)
	}
	return time.Time{}, false
}

// repeatedTime reports whether n's wall-clock time already occurred (the
// hour the clocks repeat after falling back, second occurrence), and when
// the repeated times end.
func repeatedTime(loc *time.Location, n time.Time) (time.Time, bool) {
	x := n.In(loc)
	start, _ := x.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, after := x.Zone()
	_, before := start.Add(-time.Second).In(loc).Zone()
	end := start.Add(time.Duration(before-after) * time.Second)
	return end, n.Before(end)
}
