package worker

import (
	"time"

	"github.com/robfig/cron/v3"
)

// cronStar marks a cron field given as "*" (robfig/cron's starBit).
const cronStar = 1 << 63

// dstNext is s.Next(t) for a fixed time of day (its seconds, minutes and
// hours fields all without a wildcard) made to tick once a day across
// daylight-saving changes, as cron does: a time the clocks jump over
// (spring forward) ticks at the change, and a time the clocks repeat (fall
// back) at its first occurrence only. The wall-clock times are found by
// the schedule read in UTC, which has no clock changes, and only then
// placed in the zone: robfig/cron walks the zone's clock an hour at a time
// and misses days in zones whose clocks change by other than an hour
// (Australia/Lord_Howe, Pacific/Chatham, Antarctica/Troll). Other
// schedules tick by the real clock.
func dstNext(s *cron.SpecSchedule, t time.Time) time.Time {
	if s.Second&cronStar != 0 || s.Minute&cronStar != 0 || s.Hour&cronStar != 0 {
		return s.Next(t)
	}
	loc := s.Location
	if loc == time.Local {
		loc = t.Location() // as robfig/cron reads it
	}
	utc := *s
	utc.Location = time.UTC
	w := wallClock(t.In(loc))
	for range 8 {
		if w = utc.Next(w); w.IsZero() {
			return w
		}
		at := instant(loc, w)
		if at.After(t) {
			return at
		}
		// w is a time the clocks repeat, ticked at its first occurrence,
		// and t is in their second pass: go on from the end of the
		// repeated times (as many of the schedule's as they hold).
		if end := repeatEnd(loc, t); end.After(w) {
			w = end
		}
	}
	return time.Time{}
}

// repeatEnd returns the last wall-clock time (read as UTC) before the
// clock change that started t's period in loc: for t in the second pass
// of times the clocks repeat, the last of them.
func repeatEnd(loc *time.Location, t time.Time) time.Time {
	start, _ := t.In(loc).ZoneBounds()
	if start.IsZero() {
		return time.Time{}
	}
	return wallClock(start.Add(-time.Nanosecond).In(loc))
}

// wallClock returns t's wall-clock time read as UTC.
func wallClock(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

// instant returns when wall-clock time w (read as UTC) occurs in loc: its
// first occurrence when the clocks repeat it, the clock change when they
// jump over it.
func instant(loc *time.Location, w time.Time) time.Time {
	// The offsets in force a day either side: a zone changes its clocks
	// at most once in two days.
	_, before := w.Add(-24 * time.Hour).In(loc).Zone()
	_, after := w.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		at := w.Add(-time.Duration(off) * time.Second).In(loc)
		if _, o := at.Zone(); o == off && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if !first.IsZero() {
		return first
	}
	// Skipped: read with the offset before the change it falls after it.
	start, _ := w.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start.In(loc)
}
