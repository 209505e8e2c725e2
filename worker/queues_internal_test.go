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
	// (of one priority under strict priority: in a random order)
	if got := names(s, s.order(now.Add(time.Minute))); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"b", "c"}) {
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

// TestQueueSetPartitionsSharePriority: a partitioned queue's due
// partitions share its priority, so it comes first as often as it would
// unpartitioned, and under strict priority its partitions come in a
// random order, not by name.
func TestQueueSetPartitionsSharePriority(t *testing.T) {
	now := time.Now()
	w := newQueueSet(map[string]int{"a#0": 1, "a#1": 1, "a#2": 1, "a#3": 1, "a#4": 1, "b": 1}, false)
	const draws = 4000
	first := 0
	for range draws {
		if w.queues[w.order(now)[0]].name == "b" {
			first++
		}
	}
	if f := float64(first) / draws; f < 0.44 || f > 0.56 {
		t.Fatalf("queue b (priority 1, beside a of priority 1 in five partitions) came first in %.3f of draws, want about 0.5", f)
	}
	strict := newQueueSet(map[string]int{"a#0": 5, "a#1": 5, "a#2": 5, "b": 1}, true)
	seen := map[string]int{}
	for range draws {
		o := names(strict, strict.order(now))
		if len(o) != 4 || o[3] != "b" {
			t.Fatalf("strict order %v, want a's partitions before b", o)
		}
		seen[o[0]]++
	}
	for _, n := range []string{"a#0", "a#1", "a#2"} {
		if f := float64(seen[n]) / draws; f < 0.25 || f > 0.42 {
			t.Fatalf("partition %s came first in %.3f of strict draws, want about 1/3 (%v)", n, f, seen)
		}
	}
	// under strict priority too, b beside partitioned a of its priority
	// comes first as often as a
	strict = newQueueSet(map[string]int{"a#0": 5, "a#1": 5, "a#2": 5, "b": 5, "low": 1}, true)
	first = 0
	for range draws {
		o := names(strict, strict.order(now))
		if len(o) != 5 || o[4] != "low" {
			t.Fatalf("strict order %v, want low last", o)
		}
		if o[0] == "b" {
			first++
		}
	}
	if f := float64(first) / draws; f < 0.44 || f > 0.56 {
		t.Fatalf("queue b (priority 5, beside a of priority 5 in three partitions) came first in %.3f of strict draws, want about 0.5", f)
	}
}
