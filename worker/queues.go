package worker

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// queueSet is what a pool's fetch loop knows about each of its queues: when
// the queue may next have a due job. A queue is claimed only once that time
// has come, so an idle queue costs no claim: its claim said nothing was due
// (and when the next pending job will be), and only a wake-up naming it, that
// due time, or the idle look (Ledger.FirstDue, once per poll interval) makes
// it due again. Every step is O(queues) or O(due queues × log) per fetch.
//
// The fields of queues are owned by the fetch loop's goroutine; wake-ups
// arrive on the subscription's goroutine and are handed over under mu.
type queueSet struct {
	queues []queueState // by priority, highest first, then by name
	strict bool

	mu        sync.Mutex
	woken     []int  // queues woken since the last takeWoken
	wokenFlag []bool // woken[i] is listed
	anyWoken  atomic.Bool

	// scratch reused by the fetch loop
	due   []int
	inDue []int // due partitions per queue (by queueState.group)
	keyed []keyedQueue
	names []string
	idx   []int
}

// queueState is one queue's entry.
type queueState struct {
	name   string
	weight int
	group  int       // the queue's index among the set's queues: its partitions share it
	due    bool      // the queue may have due jobs from at on
	at     time.Time // zero: now
	fails  int       // claims failed in a row (failed)
}

type keyedQueue struct {
	i   int
	key float64
}

// newQueueSet returns the set of queues (name → priority), every queue due
// at once (the pool's first look then tells which are).
func newQueueSet(queues map[string]int, strict bool) *queueSet {
	s := &queueSet{strict: strict, wokenFlag: make([]bool, len(queues))}
	for name, w := range queues {
		s.queues = append(s.queues, queueState{name: name, weight: w, due: true})
	}
	slices.SortFunc(s.queues, func(a, b queueState) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	groups := map[string]int{}
	for i := range s.queues {
		q := ledger.Logical(s.queues[i].name)
		g, ok := groups[q]
		if !ok {
			g = len(groups)
			groups[q] = g
		}
		s.queues[i].group = g
	}
	s.inDue = make([]int, len(groups))
	return s
}

// wake marks queue i woken (a job became due on it). Safe from any
// goroutine.
func (s *queueSet) wake(i int) {
	s.mu.Lock()
	if !s.wokenFlag[i] {
		s.wokenFlag[i] = true
		s.woken = append(s.woken, i)
	}
	s.mu.Unlock()
	s.anyWoken.Store(true)
}

// takeWoken makes every queue woken since the last call due at now.
func (s *queueSet) takeWoken(now time.Time) {
	if !s.anyWoken.Load() {
		return
	}
	s.mu.Lock()
	s.anyWoken.Store(false)
	for _, i := range s.woken {
		s.wokenFlag[i] = false
		s.queues[i].due, s.queues[i].at = true, now
	}
	s.woken = s.woken[:0]
	s.mu.Unlock()
}

// setDue records what a claim of queue i learnt: due from at on, or (due
// false) nothing known to become due.
func (s *queueSet) setDue(i int, at time.Time, due bool) {
	s.queues[i].due, s.queues[i].at = due, at
}

// Back-off bounds of a queue whose claims fail (failed).
const (
	claimBackoffMin = 50 * time.Millisecond
	claimBackoffMax = time.Second
)

// failed records that a claim of queue i failed at now: it is claimed
// again after a back-off doubling with each failure in a row.
func (s *queueSet) failed(i int, now time.Time) {
	q := &s.queues[i]
	q.fails++
	q.due, q.at = true, now.Add(min(claimBackoffMin<<min(q.fails-1, 5), claimBackoffMax))
}

// dueBy makes queue i due by at at the latest.
func (s *queueSet) dueBy(i int, at time.Time) {
	q := &s.queues[i]
	if !q.due || at.Before(q.at) {
		q.due, q.at = true, at
	}
}

// order returns the queues due at now in the order one fetch visits them:
// by priority with StrictPriority (queues of one priority in a random
// order, each first equally often, so none waits for another's whole
// backlog), else a random order weighted by priority (each queue drawn with
// probability proportional to its priority among those left: sorting by an
// exponential variate divided by the weight gives that order). A
// partitioned queue's due partitions share its priority and its draws, so
// partitioning a queue does not raise its share, and either way they come
// in a random order among themselves. The slice is reused by the next call.
func (s *queueSet) order(now time.Time) []int {
	s.due = s.due[:0]
	for i := range s.queues {
		if q := &s.queues[i]; q.due && !q.at.After(now) {
			s.due = append(s.due, i)
		}
	}
	if len(s.due) < 2 {
		return s.due
	}
	clear(s.inDue)
	for _, i := range s.due {
		s.inDue[s.queues[i].group]++
	}
	s.keyed = s.keyed[:0]
	for _, i := range s.due {
		q := &s.queues[i]
		key := rand.ExpFloat64() * float64(s.inDue[q.group])
		if !s.strict {
			key /= float64(q.weight)
		}
		s.keyed = append(s.keyed, keyedQueue{i: i, key: key})
	}
	slices.SortFunc(s.keyed, func(a, b keyedQueue) int {
		if s.strict { // by priority first; s.queues is sorted by it
			if c := cmp.Compare(s.queues[b.i].weight, s.queues[a.i].weight); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.key, b.key)
	})
	for j, k := range s.keyed {
		s.due[j] = k.i
	}
	return s.due
}

// next returns the earliest time a queue is due, and false when none is
// known to become due.
func (s *queueSet) next() (time.Time, bool) {
	var at time.Time
	found := false
	for i := range s.queues {
		if q := &s.queues[i]; q.due && (!found || q.at.Before(at)) {
			at, found = q.at, true
		}
	}
	return at, found
}

// allNames returns the names of every queue, by index.
func (s *queueSet) allNames() []string {
	out := make([]string, len(s.queues))
	for i := range s.queues {
		out[i] = s.queues[i].name
	}
	return out
}

// notDue returns the names of the queues not due at now, and their indexes;
// both slices are reused by the next call.
func (s *queueSet) notDue(now time.Time) ([]string, []int) {
	s.names, s.idx = s.names[:0], s.idx[:0]
	for i := range s.queues {
		if q := &s.queues[i]; !q.due || q.at.After(now) {
			s.names = append(s.names, q.name)
			s.idx = append(s.idx, i)
		}
	}
	return s.names, s.idx
}
