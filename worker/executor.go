package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fencedq/fencedq/fence"
	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// errGoexit is the error of an attempt whose handler (or middleware) ended
// its goroutine with runtime.Goexit instead of returning.
var errGoexit = errors.New("handler called runtime.Goexit (t.FailNow, t.Fatal) instead of returning")

// executor runs attempts from p.work until it is closed, then calls
// wg.Done. A handler that ends its goroutine (runtime.Goexit: t.FailNow
// in a handler under test) ends the executor with it: execute still
// completes that attempt, and a new executor takes this one's place, so
// the pool keeps one per slot and no claimed job waits for an executor
// that is gone.
func (p *Pool) executor(wg *sync.WaitGroup) {
	exited := true
	defer func() {
		if exited {
			wg.Add(1) // this goroutine's count is still held: safe during Wait
			go p.executor(wg)
		}
		wg.Done()
	}()
	for a := range p.work {
		p.execute(a)
	}
	exited = false
}

// execute runs one attempt and hands its outcome to the completer. The slot
// frees once the outcome is handed over.
//
// An attempt's outcome is decided once, into a.fin, and handed over once,
// by settle, deferred here: when execute returns, and also when its
// goroutine ends without returning (runtime.Goexit: t.FailNow in a
// handler, a middleware or RetryDelay under test).
func (p *Pool) execute(a *attempt) {
	exited := true
	defer func() { // even if settle's own logging ends the goroutine again
		if !a.slotKept { // else the completer frees it (completer.add)
			p.release()
		}
	}()
	defer func() { p.settle(a, exited) }()
	p.renewer.add(a)
	p.runAttempt(a)
	if a.markReturned() {
		a.log.Warn("a handler abandoned at shutdown returned; its result is committed only if its token still runs the job",
			"wanted", a.fin.outcome.To)
	}
	exited = false
}

// settle hands attempt a's outcome over to the completer. exited says
// its goroutine is ending (runtime.Goexit) instead of execute returning:
// that is counted and logged as a handler panic, and an outcome not yet
// decided is decided by decideExited. The hand-over is deferred, so a
// RetryDelay that ends the goroutine again while deciding still hands
// the attempt over (decided again, with the default delay).
func (p *Pool) settle(a *attempt, exited bool) {
	defer p.handOver(a)
	if !exited {
		return
	}
	p.metrics.Panics.WithLabelValues(ledger.Logical(a.job.Queue), p.kindLabel(a.job.Kind)).Inc()
	if a.fin.a != nil {
		a.log.Error("the attempt's goroutine ended after its outcome was decided; the outcome stands",
			"error", errGoexit.Error(), "wanted", a.fin.outcome.To)
		return
	}
	p.decideExited(a)
}

// handOver hands attempt a's outcome to the completer, deciding it first
// if deciding it ended the goroutine (see settle), and stops its renewals
// and its watchdog.
func (p *Pool) handOver(a *attempt) {
	if a.fin.a == nil {
		p.decideExited(a) // RetryDelay is not called again: its delay is the default
	}
	a.markReturned()
	p.renewer.remove(a)
	a.end()
	a.slotKept = p.completer.add(&a.fin, true)
}

// decideExited decides the outcome of attempt a, whose goroutine ended
// (runtime.Goexit) before the outcome was decided. Before the handler
// returned, that is a retry, unless the handler's context says the lease
// was lost, its deadline passed, an operator cancelled it or the pool
// shut down mid-call; once it returned (a middleware's Goexit after next),
// the handler's outcome stands. When RetryDelay ended it while conclude
// decided (a.decidingSet), that end is decided again with the default
// delay: an attempt's outcome is decided from one end, and RetryDelay is
// called at most once per attempt.
func (p *Pool) decideExited(a *attempt) {
	kind := p.kindLabel(a.job.Kind)
	if a.decidingSet { // RetryDelay ended it (logged there)
		p.conclude(a, a.deciding, kind)
		return
	}
	end, after := a.keptHandlerEnd()
	switch {
	case end == nil: // outside the handler's call: how its context tells
		cause := context.Cause(a.ctx)
		end = &rules.End{Err: errGoexit, Lost: errors.Is(cause, lease.ErrLost), LostCause: cause, Cancelled: a.cancelledByOperator()}
		if errors.Is(cause, errShutdown) {
			end.Shutdown = "worker shut down mid-call"
		}
		fallthrough
	case !after:
		a.log.Error("handler ended its goroutine without returning", "error", errGoexit.Error())
	default:
		a.log.Error("middleware ended its goroutine after the handler returned; the handler's outcome stands",
			"error", errGoexit.Error())
	}
	p.conclude(a, *end, kind)
}

// runAttempt takes the attempt's resource lease, if its kind names one, runs
// the handler, and returns the outcome to commit.
func (p *Pool) runAttempt(a *attempt) *finished {
	c := a.job
	if p.stopping.Err() != nil {
		return p.notStarted(a)
	}
	kind := p.kindLabel(c.Kind)
	p.series.attempt(p.metrics, c.Queue, kind).Inc()

	// A pool without the kind's worker takes no resource lease: it only
	// puts the job back (below), and would keep the resource from the
	// pools that run the kind.
	h := p.handlerFor(c.Kind)
	if h != nil && c.Resource != "" && !p.acquireResource(a, kind) {
		if p.stopping.Err() != nil {
			return p.notStarted(a)
		}
		return p.decided(a, ledger.Outcome{Defer: true, Reason: "resource busy",
			RetryIn: 100*time.Millisecond + rand.N(400*time.Millisecond)})
	}
	if p.stopping.Err() != nil {
		return p.notStarted(a) // the completer releases the resource's lease
	}
	// A worker frozen between its claim and here may have lost the job
	// meanwhile (its watchdog cancelled the attempt, or a renewal found it
	// lost): the handler must not start under a claim that lapsed. The job
	// is put back, its attempt not consumed (a commit refused when the job
	// moved on; a cancelled one when an operator asked).
	if a.lapsed() || a.ctx.Err() != nil {
		a.log.Warn("the claim lapsed before the handler started; job put back", "cause", context.Cause(a.ctx))
		return p.decided(a, ledger.Outcome{Defer: true, Reason: "the claim lapsed before the handler started"})
	}

	var end rules.End
	a.begin()
	switch {
	case h == nil && jobs.ValidateKind(c.Kind) != nil:
		// No Kind method returns it (a record edited by hand): no pool
		// can ever run the job, and its kind is not echoed.
		end = rules.End{Err: fmt.Errorf("%w: the job's kind is missing or not a valid kind name", errMalformed), Malformed: true}
	case h == nil:
		p.metrics.Rejected.WithLabelValues(ledger.Logical(c.Queue), metrics.ReasonUnknownKind).Inc()
		// Another pool (a newer deploy) may know the kind: put it back, past
		// the limit too while a live pool of the queue runs it (busy now).
		if c.KindDefers < p.cfg.UnknownKindDefers || p.servedElsewhere(a.ctx, c.Queue, c.Kind) {
			wait := min(time.Second<<min(c.KindDefers, 5), 30*time.Second)
			a.log.Warn("no worker for this kind in this pool (worker.Register one whose args' Kind() returns it); job put back for another pool",
				"put_backs", c.KindDefers+1, "limit", p.cfg.UnknownKindDefers, "in", wait)
			return p.decided(a, ledger.Outcome{Defer: true, UnknownKind: true,
				Reason: "no pool has a worker for kind " + c.Kind + " yet", RetryIn: wait})
		}
		end.Err = fmt.Errorf("%w: no worker registered for kind %q (put back %d times): a pool serving queue %s needs worker.Register "+
			"with an args type whose Kind() returns that kind (a kind renamed on one side, or a pool not deployed yet), then a re-run",
			jobs.ErrPermanent, c.Kind, c.KindDefers, ledger.Logical(c.Queue))
		end.Reason = "unknown kind"
	default:
		end = p.runHandler(a, h)
		if len(p.cfg.Middleware) > 0 && end.Err != nil && !errors.Is(end.Err, jobs.ErrUnknown) && !a.handlerEntered() {
			if f := p.beforeNext(a, &end); f != nil {
				return f
			}
		}
	}
	return p.conclude(a, end, kind)
}

// beforeNext decides the attempt a whose middleware failed with end.Err
// before next ran the handler (see notRun): put back, or (nil) concluded
// from end.
func (p *Pool) beforeNext(a *attempt, end *rules.End) *finished {
	if !notRun(end) {
		return nil
	}
	if end.Shutdown != "" {
		return p.notStarted(a)
	}
	const reason = "the lease was lost before the handler started"
	a.log.Warn("job put back without starting", "reason", reason, "cause", end.LostCause)
	return p.decided(a, ledger.Outcome{Defer: true, Reason: reason})
}

// notRun adjusts end, the end of an attempt whose middleware failed
// before next ran the handler (waiting on a semaphore, say), so that
// nothing of the job's ran and nothing needs reconciling, and reports
// whether the job is put back: cut short by the shutdown or a lost lease,
// it is, its attempt not consumed (as when the claim lapsed before the
// handler started); past the handler's deadline, end becomes an ordinary
// retry, so a middleware that always waits too long uses up the job's
// retries.
func notRun(end *rules.End) (putBack bool) {
	switch {
	case end.Shutdown != "":
		return true
	case end.TimedOut:
		end.TimedOut, end.Lost, end.RetryOnTimeout = false, false, true // nothing ran: a repeat is safe
		return false
	}
	return end.Lost
}

// reasonSkipped is the reason recorded with a success no handler made: a
// middleware returned no error without calling next.
const reasonSkipped = "handler not run: a middleware returned no error without calling next"

// conclude turns end, how attempt a's call ended, into the outcome to
// commit, counting what it shows.
func (p *Pool) conclude(a *attempt, end rules.End, kind string) *finished {
	c := a.job
	a.deciding, a.decidingSet = end, true
	outcome := rules.NameApplier(a.ctx, p.ledger, c.Queue, c.ID, end.Err, rules.Decide(end))
	if outcome.To == jobs.Succeeded && end.Err == nil && len(p.cfg.Middleware) > 0 && !a.handlerEntered() {
		// A middleware ended the attempt without next: the record says
		// so, or it would claim an effect that never happened.
		outcome.Reason = reasonSkipped
	}
	if outcome.To == jobs.Pending && !outcome.Defer {
		var after *jobs.RetryAfterError
		if errors.As(end.Err, &after) {
			outcome.RetryIn = min(max(after.Delay, 0), jobs.MaxDelay) // one built without RetryAfter too
		} else {
			outcome.RetryIn = p.retryDelay(a)
		}
	}
	a.fin = finished{a: a, outcome: outcome, err: end.Err, elapsed: a.ranFor(), kind: kind}
	if end.Lost {
		p.metrics.LeaseLost.WithLabelValues(ledger.Logical(c.Queue), kind).Inc()
	}
	if errors.Is(end.Err, fence.ErrStale) {
		p.metrics.Fenced.WithLabelValues(ledger.Logical(c.Queue), metrics.StageStorage).Inc()
		p.storageRefused(a, end.Err)
	}
	if end.Malformed {
		p.metrics.Rejected.WithLabelValues(ledger.Logical(c.Queue), metrics.ReasonMalformed).Inc()
	}
	return &a.fin
}

// retryDelay is Config.RetryDelay for the retry after attempt a: a
// negative delay is none, one past jobs.MaxDelay is capped at it (as
// jobs.RetryAfter caps its own), and a RetryDelay that panics (a table of delays
// indexed past its end) is logged with the job and replaced by the default
// delay, so the outcome is still committed and the pool goes on. It is
// computed once per attempt: a RetryDelay that ends the goroutine
// (runtime.Goexit) leaves the default delay for decideExited.
func (p *Pool) retryDelay(a *attempt) (d time.Duration) {
	if a.delaySet {
		return a.delay
	}
	n := a.job.Attempt
	a.delay, a.delaySet = defaultRetryDelay(n), true
	called := false
	defer func() {
		if r := recover(); r != nil {
			d = a.delay
			a.log.Error("RetryDelay panicked; the retry uses the default delay",
				"panic", ledger.CapError(fmt.Sprint(r)), "retry", n, "delay", d)
		} else if !called {
			a.log.Error("RetryDelay ended its goroutine (runtime.Goexit); the retry uses the default delay",
				"retry", n, "delay", a.delay)
		}
	}()
	d = min(max(p.cfg.RetryDelay(n), 0), jobs.MaxDelay)
	called = true
	a.delay = d
	return d
}

// decided records outcome, one no handler's call decided (the job put
// back), as attempt a's.
func (p *Pool) decided(a *attempt, outcome ledger.Outcome) *finished {
	a.fin = finished{a: a, outcome: outcome}
	return &a.fin
}

// notStarted puts back the job of attempt a, whose handler had not started
// when the pool began to stop: pending, due now, its attempt not consumed.
func (p *Pool) notStarted(a *attempt) *finished {
	const reason = "the pool stopped before the attempt started"
	a.log.Info("job put back without starting", "reason", reason)
	return p.decided(a, ledger.Outcome{Defer: true, Reason: reason})
}

// acquireResource takes the named resource's lease, waiting up to
// LeaseWait (less when the pool stops meanwhile), and reports whether the
// attempt holds it.
func (p *Pool) acquireResource(a *attempt, kind string) bool {
	c := a.job
	start := time.Now()
	wctx, cancel := context.WithTimeout(a.ctx, p.cfg.LeaseWait)
	unhook := context.AfterFunc(p.stopping, cancel)
	l, err := p.leases.AcquireWait(wctx, c.Resource, a.owner, p.cfg.LeaseTTL)
	unhook()
	cancel()
	p.metrics.LeaseWait.WithLabelValues(ledger.Logical(c.Queue), kind).Observe(time.Since(start).Seconds())
	if err != nil {
		switch {
		case p.stopping.Err() != nil:
			// Put back by the caller.
		case errors.Is(err, lease.ErrHeld):
			if a.log.enabled(slog.LevelDebug) {
				a.log.Debug("resource busy, job deferred", "resource", p.shown(a, c.Resource))
			}
		default:
			a.log.Warn("resource lease failed, job deferred", "resource", p.shown(a, c.Resource), "error", p.shown(a, err.Error()))
		}
		return false
	}
	a.holdResource(l) // released by the completer, whatever happens next
	// A worker frozen between its claim and this lease may have lost the
	// job meanwhile (expired, re-run and finished elsewhere) and now hold
	// the resource's newest token: it must not run the handler.
	if a.lapsed() || a.ctx.Err() != nil {
		a.log.Warn("the claim lapsed while waiting for the resource lease; job put back", "resource", p.shown(a, c.Resource))
		return false
	}
	return true
}

// runHandler runs the handler under the attempt's context, with the
// attempt's deadline and fence, and reports how it ended.
func (p *Pool) runHandler(a *attempt, h *handler) rules.End {
	c := a.job
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = p.cfg.HandlerTimeout
	}
	deadline := time.Now().Add(timeout)
	// Renewals stop at the handler's deadline: a handler that ignores its
	// context then loses the lease and the maintenance leader takes over.
	a.renewUntil(deadline)
	hctx, cancel := context.WithDeadline(a.ctx, deadline)
	defer cancel()
	tok := a.fence()
	f := fence.Fence{Resource: a.resource, Token: tok, Owner: a.owner, OperationID: c.OperationID}
	hctx = fence.NewContext(hctx, f)
	a.held = lease.Lease{Resource: a.resource, Owner: a.owner, Token: tok, Deadline: c.Deadline}
	hctx = lease.NewContext(hctx, &a.held)
	hctx, endReports := ledger.WithAttempt(hctx, p.ledger, c.Queue, c.ID, c.Token)
	base := jobs.Job[jobs.JobArgs]{
		ID: c.ID, Kind: c.Kind, Queue: c.Queue, OperationID: c.OperationID, Attempt: c.Attempt,
		MaxRetries: c.MaxRetries, Resource: a.resource, Token: tok, Owner: a.owner, Deadline: deadline,
		Headers: c.Headers,
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		// The call ended its goroutine (runtime.Goexit): keep how it
		// ended, for decideExited, while the handler's context still tells
		// (its deadline, its lease). After the handler returned, a
		// middleware ended it: the handler's outcome stands.
		ran, herr := a.handlerResult()
		switch {
		case a.strayHandler(): // safeRun logged and counted it
			ran, herr = false, errStillRunning
		case !ran:
			herr = errGoexit
		}
		a.keepHandlerEnd(p.endOf(a, h, hctx, deadline, herr), ran)
	}()
	err := p.safeRun(hctx, a, h, base, c.Payload, endReports)
	returned = true
	return p.endOf(a, h, hctx, deadline, err)
}

// safeRun calls the handler, turning a panic into a retryable error, and
// then ends the attempt's call (end: its reports). A middleware's panic
// after the handler returned keeps the handler's error.
func (p *Pool) safeRun(ctx context.Context, a *attempt, h *handler, base jobs.Job[jobs.JobArgs], payload []byte, end func()) (err error) {
	defer func() {
		if a.endCall() {
			p.metrics.Abandoned.WithLabelValues(ledger.Logical(base.Queue), h.kind).Inc()
			a.log.Error("middleware returned while next was still running the handler (next called from a goroutine it did not wait for): the attempt is uncertain",
				"error", ErrHandlerStillRunning.Error())
			err = errStillRunning
		}
		end()
	}()
	defer func() {
		if r := recover(); r != nil {
			p.metrics.Panics.WithLabelValues(ledger.Logical(base.Queue), h.kind).Inc()
			if ran, herr := a.handlerResult(); ran {
				a.log.Error("middleware panicked after the handler returned; the handler's outcome stands",
					"panic", ledger.CapError(fmt.Sprint(r)), "stack", string(debug.Stack()))
				err = herr
				return
			}
			// Capped as a returned error's text is: a panic quoting a whole
			// response body must not flood the log. The panic is the
			// handler's when it unwound through next (or there is no
			// middleware), else a middleware's (before next, or while next
			// runs in a goroutine); the attempt's error reads the same.
			msg := "handler panicked"
			if len(p.cfg.Middleware) > 0 && !a.handlerUnwound() {
				msg = "middleware panicked"
			}
			a.log.Error(msg, "panic", ledger.CapError(fmt.Sprint(r)), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	err = h.run(ctx, a, base, payload)
	mustText(err)
	return err
}

// mustText calls err's Error method, so that one that panics (a nil
// pointer of an error type whose Error reads it) panics in the call,
// where it is recovered as the call's panic, and not where the outcome
// is decided, which would crash the pool.
func mustText(err error) {
	if err != nil {
		_ = err.Error()
	}
}
