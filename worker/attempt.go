package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/watchdog"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// errCancelled is the cause given to a handler's context when an operator
// cancels its running job.
var errCancelled = errors.New("worker: job cancelled by an operator")

// errLocalDeadline is the cause given to a handler's context when no
// renewal confirmed its leases before the local deadline.
var errLocalDeadline = fmt.Errorf("%w: no renewal confirmed the lease before its local deadline", lease.ErrLost)

// attempt is one running attempt: the claimed job, its leases and the
// context its handler runs under. The renewer keeps both leases alive and
// cancels ctx, with a cause matching lease.ErrLost, the moment either is
// lost; the attempt's watchdog cancels it when they cannot be confirmed
// before their local deadline.
type attempt struct {
	job      ledger.Claimed
	owner    string // pool id / job id: the lease owner and fence owner
	resource string // the leased resource ("job:<id>" unless the args name one)
	log      jobLog // logs with the job's attributes

	ctx    context.Context
	cancel context.CancelCauseFunc
	local  watchdog.Watchdog // cancels ctx at the local deadline of every lease held (on the pool's one timer)

	// held is the lease the handler's context carries (lease.NewContext)
	// and fin the outcome handed to the completer: fields of the attempt,
	// so neither costs an allocation of its own.
	held lease.Lease
	fin  finished
	// slotKept: its outcome keeps the executor's slot until the completer
	// takes it (completer.add); only the executor's goroutine uses it.
	slotKept bool

	mu         sync.Mutex
	resLease   *lease.Lease   // the named resource's lease, once acquired
	cancelled  bool           // an operator asked to cancel the job
	lost       bool           // a lease was found lost: renewals stop
	stopAt     time.Time      // renewals stop here: the handler's deadline
	returned   bool           // the attempt's call returned (or its goroutine exited)
	abandoned  bool           // a stopping pool gave up on the call (Pool.abandon)
	onAbandon  []*func()      // called once the pool abandons the call (JobView.AfterAbandon)
	onCommit   []func(Commit) // called once the attempt's own outcome was committed or not (JobView.AfterCommit)
	entered    bool           // middleware's next ran the handler
	nextDone   bool           // next's run of the handler ended (returned, panicked or exited)
	unwound    bool           // next's run of the handler ended without returning (panicked or exited)
	handled    bool           // the handler returned handlerErr
	callOver   bool           // the handler's call, middleware included, ended: next refuses
	stray      bool           // the call ended while next still ran the handler (see endCall)
	handlerErr error
	start      time.Time // when the handler's call started (set by begin)
	// exitEnd is how the handler's call ended when its goroutine ended
	// (runtime.Goexit) in the call, read while the handler's context still
	// told (see decideExited); exitAfter says the handler had returned, so a
	// middleware ended it and the handler's outcome stands.
	exitEnd   *rules.End
	exitAfter bool

	// Set and read by the attempt's goroutine only. deciding is the end
	// conclude is deciding the outcome of (decided once it returns), so a
	// goroutine ending in RetryDelay keeps it; delay is the retry delay,
	// computed once per attempt (delaySet).
	deciding    rules.End
	decidingSet bool
	delay       time.Duration
	delaySet    bool
}

// enterHandler reports whether middleware's next may run the handler
// (nil): once per attempt, not once the attempt's call ended
// (ErrAttemptEnded), and not once hctx, the handler's context, is done or
// the claim lapsed (a middleware that kept next waiting past the lease):
// the error then says why (lease.ErrLost for a lost lease), nor under
// ctx, the context next was handed, once it ended (ErrContextEnded).
func (a *attempt) enterHandler(hctx, ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.entered || a.callOver {
		return ErrAttemptEnded
	}
	if hctx.Err() != nil {
		return fmt.Errorf("worker: the handler's context ended before next ran it: %w", context.Cause(hctx))
	}
	if a.lapsed() {
		return fmt.Errorf("worker: the claim lapsed before next ran the handler: %w", errLocalDeadline)
	}
	if ctx.Err() != nil {
		// Ended by the middleware (the attempt's own end is told above):
		// its cause is not wrapped, so nothing takes it for a timeout of
		// a handler that ran.
		return fmt.Errorf("%w: %v", ErrContextEnded, context.Cause(ctx))
	}
	a.entered = true
	return nil
}

// handlerEntered reports whether middleware's next ran the handler.
func (a *attempt) handlerEntered() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.entered
}

// handlerReturned records what the handler, run by next, returned.
func (a *attempt) handlerReturned(err error) {
	a.mu.Lock()
	a.handled, a.handlerErr = true, err
	a.mu.Unlock()
}

// handlerResult returns what the handler returned; ok is false when it
// did not return (not run, or it panicked).
func (a *attempt) handlerResult() (ok bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.handled, a.handlerErr
}

// keepHandlerEnd records end, how the handler's call ended, for a call
// whose goroutine exits; after says the handler had returned.
func (a *attempt) keepHandlerEnd(end rules.End, after bool) {
	a.mu.Lock()
	a.exitEnd, a.exitAfter = &end, after
	a.mu.Unlock()
}

// keptHandlerEnd returns the end keepHandlerEnd recorded (nil: none) and
// whether the handler had returned.
func (a *attempt) keptHandlerEnd() (end *rules.End, after bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exitEnd, a.exitAfter
}

// begin records that the handler's call starts now.
func (a *attempt) begin() {
	a.mu.Lock()
	a.start = time.Now()
	a.mu.Unlock()
}

// ranFor is how long the handler's call has run (0: not started).
func (a *attempt) ranFor() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.start.IsZero() {
		return 0
	}
	return time.Since(a.start)
}

// endCall records that the handler's call, middleware included, ended,
// and reports whether next was still running the handler then (next
// called from a goroutine the middleware did not wait for). Later calls of
// next refuse to run it.
func (a *attempt) endCall() (stray bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.callOver = true
	a.stray = a.entered && !a.nextDone
	return a.stray
}

// nextEnded records that next's run of the handler ended (returned: it
// returned, rather than panicked or ended its goroutine), and reports
// whether the attempt's call had ended before (see endCall).
func (a *attempt) nextEnded(returned bool) (late bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextDone, a.unwound = true, !returned
	return a.stray
}

// nextRunning reports whether next is running the handler now.
func (a *attempt) nextRunning() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.entered && !a.nextDone
}

// handlerUnwound reports whether next's run of the handler ended without
// returning: a panic of the handler's unwound through next.
func (a *attempt) handlerUnwound() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unwound
}

// strayHandler reports whether the handler's call ended while next was
// still running the handler.
func (a *attempt) strayHandler() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stray
}

// newAttempt starts the attempt of c, claimed by a call sent at sent, under
// work (a context that is never cancelled: see Pool.Run).
func (p *Pool) newAttempt(work context.Context, c ledger.Claimed, sent time.Time) *attempt {
	ctx, cancel := context.WithCancelCause(work)
	a := &attempt{
		job: c, owner: p.cfg.WorkerID + "/" + c.ID, resource: jobs.LeaseResource(c.ID, c.Resource),
		ctx: ctx, cancel: cancel,
	}
	a.log = jobLog{l: p.log, job: &a.job}
	p.watchdogs.Start(&a.local, sent, p.cfg.LeaseTTL, p.margin, cancel, errLocalDeadline)
	return a
}

// confirm records a renewal of every lease the attempt holds, sent at sent.
func (a *attempt) confirm(sent time.Time) { a.local.Confirm(sent) }

// lapsed reports whether the local deadline has passed.
func (a *attempt) lapsed() bool { return time.Now().After(a.local.Deadline()) }

// end disarms the watchdog: the attempt's outcome is decided.
func (a *attempt) end() { a.local.Stop() }

// holdResource records the named resource's lease, once acquired.
func (a *attempt) holdResource(l *lease.Lease) {
	a.mu.Lock()
	a.resLease = l
	a.mu.Unlock()
}

// resourceLease returns the named resource's lease (nil: none held).
func (a *attempt) resourceLease() *lease.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.resLease
}

// fence returns the attempt's fencing token: the resource lease's, else
// the ledger's.
func (a *attempt) fence() lease.Token {
	if l := a.resourceLease(); l != nil {
		return l.Token
	}
	return a.job.Token
}

// renewUntil makes renewals stop at deadline (the handler's).
func (a *attempt) renewUntil(deadline time.Time) {
	a.mu.Lock()
	a.stopAt = deadline
	a.mu.Unlock()
}

// renewing reports whether the attempt's leases are still renewed at now:
// not past the handler's deadline, and not once its context was cancelled
// for a lost lease (found lost, or its local deadline passed, even when a
// process frozen past it runs the renewer before the watchdog): a lease
// the handler was told, or is about to be told, it lost is not extended.
func (a *attempt) renewing(now time.Time) bool {
	if now.After(a.local.Deadline()) || errors.Is(context.Cause(a.ctx), lease.ErrLost) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.lost && (a.stopAt.IsZero() || !now.After(a.stopAt))
}

// loseLease cancels the handler's context with cause (matching
// lease.ErrLost) and stops the attempt's renewals: a lost lease does not
// come back, however long the handler runs on.
func (a *attempt) loseLease(cause error) {
	a.mu.Lock()
	a.lost = true
	a.mu.Unlock()
	a.cancel(cause)
}

// cancelByOperator cancels the handler's context at an operator's request;
// only the first request counts.
func (a *attempt) cancelByOperator() {
	a.mu.Lock()
	first := !a.cancelled
	a.cancelled = true
	a.mu.Unlock()
	if first {
		a.log.Info("an operator cancelled the job: cancelling the handler's context")
		a.cancel(errCancelled)
	}
}

// cancelledByOperator reports whether an operator cancelled the job.
func (a *attempt) cancelledByOperator() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancelled
}

// abandon marks the attempt abandoned by a stopping pool and reports
// whether it was still running (false: its call already returned), with
// the functions to call for it (JobView.AfterAbandon).
func (a *attempt) abandon() (ok bool, hooks []func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.returned {
		return false, nil
	}
	a.abandoned = true
	for _, f := range a.onAbandon {
		hooks = append(hooks, *f)
	}
	a.onAbandon = nil
	return true, hooks
}

// afterAbandon registers f for abandon (see JobView.AfterAbandon).
func (a *attempt) afterAbandon(f func()) (stop func() bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.returned || a.abandoned {
		return func() bool { return false }
	}
	h := &f
	a.onAbandon = append(a.onAbandon, h)
	return func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		i := slices.Index(a.onAbandon, h)
		if i < 0 {
			return false
		}
		a.onAbandon = slices.Delete(a.onAbandon, i, i+1)
		return true
	}
}

// afterCommit registers f for committed (see JobView.AfterCommit) and
// reports whether it did: not once the attempt's call returned.
func (a *attempt) afterCommit(f func(Commit)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.returned {
		return false
	}
	a.onCommit = append(a.onCommit, f)
	return true
}

// committed calls, once, the functions registered with afterCommit with
// c, what became of the attempt's own outcome; a panic in one is logged.
func (a *attempt) committed(c Commit) {
	a.mu.Lock()
	fs := a.onCommit
	a.onCommit = nil
	a.mu.Unlock()
	for _, f := range fs {
		func() {
			defer func() {
				if r := recover(); r != nil {
					a.log.Error("a function registered with AfterCommit panicked", "panic", ledger.CapError(fmt.Sprint(r)))
				}
			}()
			f(c)
		}()
	}
}

// markReturned records that the attempt's call returned and reports
// whether the pool had abandoned it before (its result is then late).
func (a *attempt) markReturned() (late bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.returned = true
	return a.abandoned
}
