package worker

import (
	"slices"
	"testing"
	"time"
)

// TestQueueSetOrder: strict priority visits due queues by priority; the
// weighted order draws a queue first in proportion to its priority; queues
// not due are left out.
func TestQueueSetOrder(t *testing.T) {
	now := time.Now()
	strict := newQueueSet(map[string]int{"low": 1, "high": 10, "mid": 5}, true)
	if got := names(strict, strict.order(now)); !slices.Equal(got, []string{"high", "mid", "low"}) {
		t.Fatalf("strict order %v", got)
	}
	strict.setDue(1, now.Add(time.Minute), true) // mid: due later
	if got := names(strict, strict.order(now)); !slices.Equal(got, []string{"high", "low"}) {
		t.Fatalf("strict order with mid not due %v", got)
	}
	if at, ok := strict.next(); !ok || !at.IsZero() {
		t.Fatalf("next %v %v, want due now", at, ok)
	}

	w := newQueueSet(map[string]int{"a": 3, "b": 1}, false)
	const draws = 4000
	first := 0
	for range draws {
		o := w.order(now)
		if len(o) != 2 {
			t.Fatalf("order %v", o)
		}
		if w.queues[o[0]].name == "a" {
			first++
		}
	}
	if f := float64(first) / draws; f < 0.70 || f > 0.80 {
		t.Fatalf("queue a (weight 3 of 4) came first in %.3f of draws, want about 0.75", f)
	}
}

// TestQueueSetWakeAndLook: a queue whose claim found nothing is left out
// until a wake-up or a look makes it due; next reports the earliest known
// due time; notDue lists exactly the queues not due now.
func TestQueueSetWakeAndLook(t *testing.T) {
	now := time.Now()
	s := newQueueSet(map[string]int{"a": 1, "b": 1, "c": 1}, true)
	s.setDue(0, time.Time{}, false)       // a: empty
	s.setDue(1, now.Add(time.Hour), true) // b: due in an hour
	s.setDue(2, time.Time{}, false)       // c: empty
	if o := s.order(now); len(o) != 0 {
		t.Fatalf("due queues %v, want none", names(s, o))
	}
	if at, ok := s.next(); !ok || !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("next %v %v", at, ok)
	}
	if got, _ := s.notDue(now); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("notDue %v", got)
	}
	s.wake(2)
	s.wake(2)
	s.takeWoken(now)
	if got := names(s, s.order(now)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after waking c: %v", got)
	}
	s.dueBy(1, now.Add(time.Minute)) // a look: b is due sooner
	s.dueBy(1, now.Add(2*time.Hour)) // a later time changes nothing
	if at, _ := s.next(); !at.Equal(now) {
		t.Fatalf("next %v, want now (c)", at)
	}
	if got := names(s, s.order(now.Add(time.Minute))); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("a minute on: %v", got)
	}
}

func names(s *queueSet, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = s.queues[j].name
	}
	return out
}
