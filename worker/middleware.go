package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// Handler runs one attempt's handler: the registered worker's Work, as
// wrapped by the middleware after the one it is handed to.
type Handler func(ctx context.Context, job JobView) error

// Middleware wraps every handler call of a pool (Config.Middleware, the
// first outermost): logging, tracing, a panic policy, a tenant's context.
// It runs in the attempt's goroutine once the attempt holds its leases,
// with the handler's context (its deadline, its fence: fence.FromContext,
// and cancelled the moment a lease is lost), and sees the job (JobView)
// and the error the handler returned. It may derive a context for next
// from ctx (never replace it: the handler would lose its fence and its
// cancellation) and may return another error, which then steers the
// outcome as the handler's would (see Config). Attempts that never reach
// a handler, because their resource was busy or no worker is registered
// for their kind, are not wrapped. A handler's panic unwinds through next,
// as in asynq: code after next runs only if deferred (a deferred recover
// sees the panic, and the error the middleware then returns steers the
// outcome). A panic in middleware is recovered
// like one in a handler, except after next returned: the handler's
// outcome then stands (the panic is logged and counted), as it does when
// the middleware ends its goroutine there (runtime.Goexit). next runs the
// handler once: a second call, or one after the attempt's call ended
// (from a goroutine), returns ErrAttemptEnded without running it, and so
// does one made once the handler's context ended or the claim lapsed
// (with the cause: lease.ErrLost for a lost lease); a call with a context
// not derived from the attempt's returns ErrContextReplaced, and one with
// a JobView not the attempt's ErrForeignJobView, and one that already
// ended (the middleware's own cancel or timeout) ErrContextEnded, the
// handler not run (a
// context that keeps the attempt's values under a deadline of its own,
// context.WithoutCancel then WithTimeout, runs it, still cancelled with
// the attempt's context). The
// attempt's outcome is decided when the middleware returns: one that
// returns while next, called from a goroutine, still runs the handler
// ends the attempt uncertain with ErrHandlerStillRunning: a middleware
// that runs next in a goroutine must wait for it to return. A
// middleware that returns no error without calling next ends the attempt
// as succeeded without the handler (a warning names the job, and the
// job's record and history give the reason "handler not run: ...").
type Middleware func(next Handler) Handler

// ErrAttemptEnded is what a middleware's next returns, without running the
// handler, when the handler already ran for the attempt or the attempt's
// call ended.
var ErrAttemptEnded = errors.New("worker: the attempt's handler already ran or its call ended")

// ErrHandlerStillRunning is the error of an attempt whose middleware
// returned (or panicked, or ended its goroutine) while next, called from a
// goroutine it did not wait for, was still running the handler. The
// handler's effect may still happen, so the attempt is recorded uncertain
// (the error matches jobs.ErrUnknown too), whatever the middleware
// returned; it is logged with the job, counted in
// fencedq_handlers_abandoned_total, and the handler's context is
// cancelled. What the handler returns later is logged, never committed.
var ErrHandlerStillRunning = errors.New("worker: middleware returned while next was still running the handler")

// ErrContextReplaced is what a middleware's next returns, without running
// the handler, when the context it was handed is not derived from the
// attempt's: one without the attempt's lease and fence (context.Background,
// a context of the middleware's own), or without its deadline
// (context.WithoutCancel), which would also have lost the cancellation
// that tells the handler its lease was lost. The handler never runs
// without its fence.
var ErrContextReplaced = errors.New("worker: next was called with a context not derived from its attempt's (the handler would lose its fence and its cancellation)")

// ErrContextEnded is what a middleware's next returns, without running the
// handler, when the context it was handed (derived from the attempt's)
// had already ended: the middleware cancelled it, or gave it a timeout
// already past (a timeout of 0 from a setting left unset). The handler
// could only fail under it, and a kind that can be reconciled would be
// left uncertain though nothing ran; the error does not match the
// context's cause, so the attempt ends as an ordinary error does (a retry).
var ErrContextEnded = errors.New("worker: next was called with a context that had already ended")

// ErrForeignJobView is what a middleware's next returns, without running
// any handler, when the JobView it was handed is not its attempt's: one
// the middleware made up (the zero value) or another attempt's.
var ErrForeignJobView = errors.New("worker: next was called with a JobView that is not its attempt's")

// errStillRunning is the error an attempt ends with when its call ended
// while next still ran the handler (see ErrHandlerStillRunning).
var errStillRunning = jobs.Unknown(ErrHandlerStillRunning)

// JobView is a read-only view of the job an attempt runs, handed to
// middleware. The args are not part of it: they may hold sensitive fields.
type JobView struct {
	job     jobs.Job[jobs.JobArgs]
	payload []byte
	// what Outcome needs
	p    *Pool
	a    *attempt
	h    *handler
	hctx context.Context
}

// ID returns the job's id.
func (v JobView) ID() string { return v.job.ID }

// Kind returns the job's kind.
func (v JobView) Kind() string { return v.job.Kind }

// Queue returns the job's queue.
func (v JobView) Queue() string { return v.job.Queue }

// OperationID returns the job's operation id.
func (v JobView) OperationID() string { return v.job.OperationID }

// Attempt returns the attempt's number, starting at 1.
func (v JobView) Attempt() int { return v.job.Attempt }

// MaxRetries returns how many retries follow a failed attempt.
func (v JobView) MaxRetries() int { return v.job.MaxRetries }

// Resource returns the leased resource ("job:<id>" unless the args name one).
func (v JobView) Resource() string { return v.job.Resource }

// Token returns the attempt's fencing token.
func (v JobView) Token() lease.Token { return v.job.Token }

// Owner returns the attempt's owner (worker id and job id).
func (v JobView) Owner() string { return v.job.Owner }

// Deadline returns when the handler's context ends.
func (v JobView) Deadline() time.Time { return v.job.Deadline }

// Header returns the job's header key ("" when it has none).
func (v JobView) Header(key string) string { return v.job.Headers[key] }

// Headers returns a copy of the job's headers (nil when it has none).
func (v JobView) Headers() map[string]string { return maps.Clone(v.job.Headers) }

// HandlerResult reports whether the attempt's handler returned, and what:
// returned is false while it has not (not run yet, still running, or it
// panicked). A middleware that recovers a panic, or sees its goroutine
// end, after next can tell from it whether the handler's outcome stands
// (see Middleware).
func (v JobView) HandlerResult() (returned bool, err error) {
	if v.a == nil {
		return false, nil
	}
	return v.a.handlerResult()
}

// AfterAbandon arranges for f to be called, in a goroutine of its own,
// if the stopping pool abandons the attempt: its handler still running
// once the shutdown timeout and the wait after cancelling its context
// passed, the pool records the attempt uncertain (OutcomeUncertain)
// without waiting for it any longer (see Pool.Run), and Run waits for f
// within its bound. A middleware that ends something with the attempt (a
// span) ends it there too. stop unregisters f and reports whether it did
// so before f was called; call it once the attempt's call ends. On a
// JobView made up outside a pool, f is never called.
func (v JobView) AfterAbandon(f func()) (stop func() bool) {
	if v.a == nil {
		return func() bool { return false }
	}
	return v.a.afterAbandon(f)
}

// Commit is what became of an attempt's outcome once the pool tried to
// commit it (see JobView.AfterCommit). Neither Applied nor Refused: the
// commit failed with an unknown result (Redis unreachable, or too few
// replicas acknowledging it in durable mode), or a stopping pool gave up
// on it, and the maintenance leader resolves the job once its lease
// expires.
type Commit struct {
	// Applied is true when the ledger applied the outcome.
	Applied bool
	// Refused is true when the ledger refused the outcome as stale: a
	// newer attempt's token owns the job, the job left running under this
	// attempt's token before the commit (its lease expired), or its record
	// is gone.
	Refused bool
	// State is the job's state the ledger answered with: Applied, the
	// state the outcome recorded (jobs.Pending for a retry or a job put
	// back); Refused, the job's current state ("missing" when its record
	// is gone); empty when neither.
	State jobs.State
}

// AfterCommit arranges for f to be called once the pool has tried to
// commit the attempt's outcome, with what became of it, and reports
// whether it did (false on a JobView made up outside a pool, or once the
// attempt's call ended). What JobView.Outcome tells before then is what
// the attempt asks for: the ledger applies it only if the attempt's token
// still runs the job. f runs in the pool's committing goroutine, after
// the middleware returned: it must not block (end a span, count). It is
// not called for an attempt whose handler never returns after the
// stopping pool abandoned it (see AfterAbandon), and once for one that
// returns later, with what became of its late result.
func (v JobView) AfterCommit(f func(Commit)) bool {
	if v.a == nil {
		return false
	}
	return v.a.afterCommit(f)
}

// The outcomes JobView.Outcome reports.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetry     = "retry"
	OutcomeDead      = "dead"
	OutcomeUncertain = "uncertain"
	OutcomeCancelled = "cancelled"
)

// Outcome returns the outcome the attempt would commit if its handler
// call ended now with err: OutcomeSucceeded, OutcomeRetry, OutcomeDead
// (a permanent error, a malformed payload, or retries exhausted),
// OutcomeUncertain (an unknown result, a lease lost, the deadline passed,
// a shutdown mid-call, or next still running the handler, called from a
// goroutine a later middleware did not wait for: ErrHandlerStillRunning)
// or OutcomeCancelled (an operator cancelled the job). An err (not an
// unknown result) returned before next ran the handler leaves nothing
// uncertain, as nothing ran: after a lost lease or at shutdown the job is
// put back (OutcomeRetry, its attempt not consumed), and past the
// handler's deadline err is judged as an ordinary error.
// The pool decides again by the same rules once the outermost middleware
// returns, so a lease lost or a deadline passed in between can still make
// the job uncertain; and the ledger commits the outcome only if the
// attempt's token still runs the job (AfterCommit tells what it did). A JobView made up outside a pool
// (the zero value, in a middleware's own test) is judged by err alone.
func (v JobView) Outcome(err error) string {
	if v.p == nil {
		end := rules.End{Err: err, Malformed: errors.Is(err, errMalformed)}
		return outcomeName(rules.Decide(end).To, false, v.job)
	}
	if v.a.nextRunning() {
		return OutcomeUncertain
	}
	end := v.p.endOf(v.a, v.h, v.hctx, v.job.Deadline, err)
	if len(v.p.cfg.Middleware) > 0 && err != nil && !errors.Is(err, jobs.ErrUnknown) && !v.a.handlerEntered() && notRun(&end) {
		return OutcomeRetry // put back, its attempt not consumed
	}
	return outcomeName(rules.Decide(end).To, end.Cancelled, v.job)
}

// outcomeName names the outcome to of an attempt of job, as the ledger
// will commit it (a retry of a cancelled job or one out of retries ends
// the job).
func outcomeName(to jobs.State, cancelled bool, job jobs.Job[jobs.JobArgs]) string {
	switch {
	case to != jobs.Pending:
		return string(to)
	case cancelled:
		return OutcomeCancelled
	case job.Attempt > job.MaxRetries:
		return OutcomeDead
	}
	return OutcomeRetry
}

// runFunc runs a registered kind's handler on an attempt.
type runFunc func(ctx context.Context, a *attempt, base jobs.Job[jobs.JobArgs], payload []byte) error

// wrap returns run wrapped in the pool's middleware (run itself when there
// is none, so a pool without middleware pays nothing for it). A middleware
// that returns a nil Handler fails it with ErrConfig.
func (p *Pool) wrap(h *handler, run runFunc) (runFunc, error) {
	mw := p.cfg.Middleware
	if len(mw) == 0 {
		return run, nil
	}
	next := Handler(func(ctx context.Context, v JobView) (err error) {
		if err := v.sameAttempt(ctx); err != nil {
			return err
		}
		if err := v.a.enterHandler(v.hctx, ctx); err != nil {
			return err
		}
		returned := false
		defer func() {
			if v.a.nextEnded(returned) { // the attempt's call ended first: it is recorded uncertain
				text := "none"
				if !returned {
					text = "it did not return (a panic, or runtime.Goexit)"
				} else if err != nil {
					text = ledger.CapError(err.Error())
				}
				v.a.log.Error("the handler ended after its attempt did (its middleware returned while next ran it); its result is not committed",
					"error", text)
			}
		}()
		// A context that kept the attempt's values but not its cancellation
		// (context.WithoutCancel under a deadline of its own) still ends
		// with the attempt's: a lost lease, an operator's cancel, a
		// shutdown. One that only added values shares its Done: no cost.
		if ctx.Done() != v.hctx.Done() {
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			stop := context.AfterFunc(v.hctx, func() { cancel(context.Cause(v.hctx)) })
			defer func() { stop(); cancel(nil) }()
		}
		// The handler's own scope of the attempt: reports from goroutines it
		// leaves running fail once it returns.
		ctx, end := ledger.ScopeAttempt(ctx)
		defer end()
		err = run(ctx, v.a, v.job, v.payload)
		mustText(err) // a panic of the handler's, not one after it returned
		v.a.handlerReturned(err)
		returned = true
		return err
	})
	for i := len(mw) - 1; i >= 0; i-- {
		if next = mw[i](next); next == nil {
			return nil, fmt.Errorf("%w: middleware %d returned a nil Handler", ErrConfig, i)
		}
	}
	return func(ctx context.Context, a *attempt, base jobs.Job[jobs.JobArgs], payload []byte) error {
		err := next(ctx, JobView{job: base, payload: payload, p: p, a: a, h: h, hctx: ctx})
		if err == nil && !a.handlerEntered() {
			a.log.Warn("middleware returned no error without running the handler; the attempt succeeds without it")
		}
		return err
	}, nil
}

// sameAttempt checks that ctx, the context a middleware handed next, is
// derived from the handler's context of v's attempt: it carries that
// attempt's lease (so its fence too) and a deadline no later than the
// handler's. It reads only what ctx already holds.
func (v JobView) sameAttempt(ctx context.Context) error {
	if v.a == nil { // made up by the middleware
		return ErrForeignJobView
	}
	l, ok := lease.FromContext(ctx)
	if !ok {
		return ErrContextReplaced
	}
	if l != &v.a.held { // the context of another attempt
		return ErrForeignJobView
	}
	if dl, has := ctx.Deadline(); !has || dl.After(v.job.Deadline) {
		return ErrContextReplaced // its values, without its cancellation
	}
	return nil
}

// endOf is how attempt a's handler call ended with err: hctx is the
// handler's context and deadline its deadline.
func (p *Pool) endOf(a *attempt, h *handler, hctx context.Context, deadline time.Time, err error) rules.End {
	cause := context.Cause(a.ctx)
	end := rules.End{
		Err:            err,
		Malformed:      errors.Is(err, errMalformed),
		Lost:           errors.Is(cause, lease.ErrLost),
		LostCause:      cause,
		Cause:          cause,
		Cancelled:      a.cancelledByOperator(),
		TimedOut:       errors.Is(hctx.Err(), context.DeadlineExceeded) && !time.Now().Before(deadline),
		RetryOnTimeout: h.retryOnTimeout,
		Reconcilable:   h.reconcile != nil || p.cfg.Maintenance.EffectLog != nil,
	}
	if errors.Is(cause, errShutdown) {
		end.Shutdown = "worker shut down mid-call"
	}
	end.Output, end.OutputDisplay = ledger.OutputOf(hctx)
	return end
}

// String describes the attempt without its args (which may hold sensitive
// fields), so a JobView formatted with %v or %+v shows no payload.
func (v JobView) String() string {
	return fmt.Sprintf("job %s (kind %s, queue %s, attempt %d, token %s)", v.job.ID, v.job.Kind, v.job.Queue, v.job.Attempt, v.job.Token)
}

// LogValue logs the attempt without its args (see String).
func (v JobView) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", v.job.ID), slog.String("kind", v.job.Kind), slog.String("queue", v.job.Queue),
		slog.Int("attempt", v.job.Attempt), slog.String("token", v.job.Token.String()))
}
