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
// itself for the new one.
package watchdog

import (
	"context"
	"sync"
	"time"
)

// The default safety margin (a configured margin of zero) is
// ttl/DefaultMarginDivisor, at least MinDefaultMargin.
const (
	DefaultMarginDivisor = 10
	MinDefaultMargin     = 10 * time.Millisecond
)

// Margin returns the safety margin of a lease of ttl: margin when positive,
// else the default (ttl/DefaultMarginDivisor, at least MinDefaultMargin),
// capped at half the TTL.
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
	timer     *time.Timer
	over      bool // fired or stopped
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
		w.timer.Reset(left)
		return
	}
	w.over = true
	w.cancel(w.cause)
}
