// Package watchdog holds the local deadline of a lease: the one rule, and
// the one timer, by which every holder of a lease in this module (the lease
// package's keep-alive, a worker pool's attempts, the asynq bridge's
// attempts) stops trusting a lease it could not confirm in time.
//
// The local deadline is the local send time of the last confirmed acquire
// (or claim) or renew, plus the lease's TTL, minus a safety margin:
//
//	deadline = confirmed + TTL - margin
//
// Measuring from the send time with the monotonic clock means network delay
// only ever shortens the local view of the lease; the margin covers clock
// drift between this process and Redis, whose clock sets the lease's real
// end. [Margin] gives the margin: the configured one, or by default a tenth
// of the TTL ([DefaultMarginDivisor]) and at least [MinDefaultMargin], and
// never more than half the TTL.
//
// A [Watchdog] cancels a context, with a cause the holder chooses, once the
// local deadline passes without a confirmation. It costs one timer and does
// not reset it on each confirmation: the timer fires at the deadline it was
// armed for and, if a confirmation moved the deadline meanwhile, re-arms
// itself for the new one. Watchdogs started through a [Group] share the
// group's one timer instead (a pool's attempts: one timer per pool, armed at
// the earliest deadline of a heap), under the same rule.
package watchdog

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// The default safety margin (a configured margin of zero) is
// ttl/DefaultMarginDivisor, at least MinDefaultMargin.
const (
	DefaultMarginDivisor = 10
	MinDefaultMargin     = 10 * time.Millisecond
)

// CheckMargin refuses a configured safety margin above half the lease's
// ttl (a margin of zero or less picks the default, which Margin fits).
func CheckMargin(ttl, margin time.Duration) error {
	if margin > ttl/2 {
		return fmt.Errorf("safety margin %v is more than half the lease TTL %v: give a margin of at most %v, or a longer TTL", margin, ttl, ttl/2)
	}
	return nil
}

// Margin returns the safety margin of a lease of ttl: margin when positive
// (CheckMargin refuses one above half the TTL), else the default
// (ttl/DefaultMarginDivisor, at least MinDefaultMargin), capped at half the
// TTL.
func Margin(ttl, margin time.Duration) time.Duration {
	if margin <= 0 {
		margin = max(ttl/DefaultMarginDivisor, MinDefaultMargin)
	}
	return min(margin, ttl/2)
}

// Watchdog cancels a context at a lease's local deadline unless a
// confirmation moved the deadline first. The zero value is ready for Start;
// a Watchdog must not be copied after Start. Its methods are safe for
// concurrent use.
type Watchdog struct {
	mu        sync.Mutex
	window    time.Duration // ttl - margin
	confirmed time.Time     // local send time of the last confirmation
	cancel    context.CancelCauseFunc
	cause     error
	timer     *time.Timer // nil in a group
	over      bool        // fired or stopped

	group *Group    // the group whose timer serves w (nil: its own timer)
	index int       // w's place in the group's heap (-1: not in it); under group.mu
	due   time.Time // the deadline w is in the heap for; under group.mu
}

// Start arms w for a lease of ttl whose last confirmation was sent at
// confirmed: at confirmed + ttl - margin (margin as returned by Margin), w
// calls cancel(cause), once, unless Confirm moved the deadline or Stop came
// first. Start must be called once, before the other methods.
func (w *Watchdog) Start(confirmed time.Time, ttl, margin time.Duration, cancel context.CancelCauseFunc, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.window, w.confirmed, w.cancel, w.cause = ttl-margin, confirmed, cancel, cause
	w.timer = time.AfterFunc(time.Until(w.deadline()), w.expire)
}

// Group serves many watchdogs with one timer, armed at the earliest
// deadline among them: starting, confirming and stopping a watchdog costs
// a heap operation at most, and no timer of its own. Confirmations do not
// touch the heap: a watchdog found in it past a deadline that moved is put
// back for the new one, as a lone watchdog re-arms its timer. The zero
// value is ready to use; a Group must not be copied after first use.
type Group struct {
	mu    sync.Mutex
	h     watchHeap
	timer *time.Timer
	armed time.Time // what the timer is set for (zero: stopped)
}

// Start arms w, as Watchdog.Start does, on g's timer.
func (g *Group) Start(w *Watchdog, confirmed time.Time, ttl, margin time.Duration, cancel context.CancelCauseFunc, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.window, w.confirmed, w.cancel, w.cause = ttl-margin, confirmed, cancel, cause
	w.group, w.index = g, -1
	g.add(w, w.deadline())
}

// Len returns how many watchdogs wait on g's timer.
func (g *Group) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.h)
}

// add puts w in the heap for deadline due and arms the timer for it when it
// is the earliest.
func (g *Group) add(w *Watchdog, due time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.due = due
	if w.index >= 0 {
		heap.Fix(&g.h, w.index)
	} else {
		heap.Push(&g.h, w)
	}
	g.arm()
}

// remove takes w out of the heap and stops the timer when none is left.
func (g *Group) remove(w *Watchdog) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&g.h, w.index)
	}
	if len(g.h) == 0 && g.timer != nil {
		g.timer.Stop()
		g.armed = time.Time{}
	}
}

// arm sets the timer for the earliest deadline in the heap, unless it is
// set for that moment or an earlier one already (an early firing finds
// nothing due and re-arms). g.mu is held.
func (g *Group) arm() {
	if len(g.h) == 0 {
		return
	}
	next := g.h[0].due
	if !g.armed.IsZero() && !next.Before(g.armed) {
		return
	}
	g.armed = next
	if g.timer == nil {
		g.timer = time.AfterFunc(time.Until(next), g.fire)
		return
	}
	g.timer.Reset(time.Until(next))
}

// fire takes every watchdog whose deadline passed out of the heap and
// checks each: it cancels the context, or puts the watchdog back for the
// deadline a confirmation moved it to.
func (g *Group) fire() {
	now := time.Now()
	g.mu.Lock()
	var due []*Watchdog
	for len(g.h) > 0 && !g.h[0].due.After(now) {
		due = append(due, heap.Pop(&g.h).(*Watchdog))
	}
	g.armed = time.Time{}
	g.arm()
	g.mu.Unlock()
	for _, w := range due {
		w.check(now)
	}
}

// watchHeap orders watchdogs by the deadline they wait for.
type watchHeap []*Watchdog

func (h watchHeap) Len() int           { return len(h) }
func (h watchHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h watchHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *watchHeap) Push(x any) {
	w := x.(*Watchdog)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *watchHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}

// Confirm records a confirmation of the lease sent at sent: the deadline
// moves to sent + ttl - margin unless a later confirmation is recorded
// already. A confirmation after the watchdog fired changes nothing.
func (w *Watchdog) Confirm(sent time.Time) {
	w.mu.Lock()
	if sent.After(w.confirmed) {
		w.confirmed = sent
	}
	w.mu.Unlock()
}

// Deadline returns the current local deadline.
func (w *Watchdog) Deadline() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deadline()
}

// Stop disarms w. Once Stop returns, w has either cancelled its context
// already or never will. Stopping a watchdog never started is a no-op.
func (w *Watchdog) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.group != nil {
		w.group.remove(w)
	}
}

func (w *Watchdog) deadline() time.Time { return w.confirmed.Add(w.window) }

// expire runs when the timer fires.
func (w *Watchdog) expire() { w.check(time.Now()) }

// check cancels the context if the deadline is not after now, and re-arms
// the timer for the deadline otherwise. The cancel runs under w's lock, so
// that Stop waits for it.
func (w *Watchdog) check(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return
	}
	if left := w.deadline().Sub(now); left > 0 {
		if w.group != nil {
			w.group.add(w, w.deadline())
		} else {
			w.timer.Reset(left)
		}
		return
	}
	w.over = true
	w.cancel(w.cause)
}
