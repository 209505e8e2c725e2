package worker_test

import (
	"testing"
	"time"

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
