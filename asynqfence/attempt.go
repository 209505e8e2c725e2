package asynqfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/watchdog"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// errCancelled is the cause given to a handler's context when an operator
// cancels its running job.
var errCancelled = errors.New("asynqfence: job cancelled by an operator")

// errGoexit is the error of an attempt whose handler ended its goroutine
// (runtime.Goexit) instead of returning.
var errGoexit = errors.New("handler called runtime.Goexit (t.FailNow, t.Fatal) instead of returning")

// errLocalDeadline is the cause given to a handler's context when no
// renewal confirmed its lease before the local deadline.
var errLocalDeadline = fmt.Errorf("%w: no renewal confirmed the lease before its local deadline", lease.ErrLost)

// Attempt is the fenced attempt a delivery runs under (see
// AttemptFromContext).
type Attempt struct {
	// ID is the job's id in the ledger: the operation id the task carries,
	// else asynq's task id.
	ID string
	// Queue is the ledger queue.
	Queue string
	// Kind is the task type.
	Kind string
	// OperationID identifies the effect (the ID).
	OperationID string
	// Attempt counts the job's attempts in the ledger, starting at 1.
	Attempt int
	// MaxRetries is asynq's retry limit for the task.
	MaxRetries int
	// Resource is what the fence protects ("job:<id>").
	Resource string
	// Token is the attempt's fencing token.
	Token lease.Token
	// Owner identifies the attempt (worker id and job id).
	Owner string
	// Deadline is the attempt's first lease deadline in the ledger; the bridge
	// renews it while the handler runs.
	Deadline time.Time
}

type attemptKey struct{}

// AttemptFromContext returns the fenced attempt a handler runs under.
// fence.FromContext returns its fence.
func AttemptFromContext(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}

// run runs next under a fenced attempt, claimed by a call sent at sent,
// renews the attempt while it runs, and completes the outcome with the
// attempt's token.
func (b *Bridge) run(ctx context.Context, t *asynq.Task, next asynq.Handler, c ledger.Claimed, sent time.Time, log *slog.Logger) error {
	log = log.With("attempt", c.Attempt, "token", c.Token.String())
	kind := b.kindLabel(t, next) // the metric label; c.Kind is the task type
	b.metrics.Attempted.WithLabelValues(ledger.Logical(c.Queue), kind).Inc()
	a := Attempt{
		ID: c.ID, Queue: c.Queue, Kind: c.Kind, OperationID: c.OperationID, Attempt: c.Attempt, MaxRetries: c.MaxRetries,
		Resource: jobs.LeaseResource(c.ID, ""), Token: c.Token, Owner: b.opts.WorkerID + "/" + c.ID, Deadline: c.Deadline,
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hctx := fence.NewContext(actx, fence.Fence{Resource: a.Resource, Token: a.Token, Owner: a.Owner, OperationID: a.OperationID})
	hctx, endAttempt := ledger.WithAttempt(hctx, b.ledger, c.Queue, c.ID, c.Token)
	hctx = lease.NewContext(hctx, &lease.Lease{Resource: a.Resource, Owner: a.Owner, Token: a.Token, Deadline: a.Deadline})
	hctx = context.WithValue(hctx, attemptKey{}, a)

	r := b.startRenewer(c, sent, cancel, log)
	start := time.Now()
	returned := false
	defer func() {
		if returned {
			return
		}
		// The handler ended its goroutine (runtime.Goexit): the attempt
		// ends as a panic's does, so that its lease is not renewed forever.
		// asynq gets no answer and delivers the task again once its
		// timeout passes.
		b.metrics.Panics.WithLabelValues(ledger.Logical(c.Queue), kind).Inc()
		log.Error("handler ended its goroutine without returning; asynq delivers the task again once its timeout passes",
			"error", errGoexit.Error())
		_ = b.finish(ctx, t, next, c, a, actx, hctx, endAttempt, r, start, kind, errGoexit, log)
	}()
	err := b.safeRun(hctx, t, next, c.Queue, kind, log)
	returned = true
	return b.finish(ctx, t, next, c, a, actx, hctx, endAttempt, r, start, kind, err, log)
}

// finish ends attempt a of claim c, whose handler ended with err: stops
// renewing its lease, decides its outcome and commits it with the
// attempt's token, and returns what asynq gets.
func (b *Bridge) finish(ctx context.Context, t *asynq.Task, next asynq.Handler, c ledger.Claimed, a Attempt,
	actx, hctx context.Context, endAttempt func(), r *renewer, start time.Time, kind string, err error, log *slog.Logger) error {
	endAttempt()
	elapsed := time.Since(start)
	r.stop()

	cause := context.Cause(actx)
	end := attempt.End{
		Err:            err,
		Permanent:      errors.Is(err, asynq.SkipRetry) || errors.Is(err, asynq.RevokeTask), // asynq runs neither again
		Malformed:      errors.Is(err, errMalformed),
		Lost:           errors.Is(cause, lease.ErrLost),
		LostCause:      cause,
		Cause:          cause,
		Cancelled:      errors.Is(cause, errCancelled),
		TimedOut:       errors.Is(ctx.Err(), context.DeadlineExceeded),
		RetryOnTimeout: retriesOnTimeout(t, next),
		Reconcilable:   b.reconcilerFor(t, next) != nil || b.opts.EffectLog != nil,
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		end.Shutdown = "asynq cancelled the handler mid-call"
	}
	end.Output, end.OutputDisplay = ledger.OutputOf(hctx)
	outcome := attempt.NameApplier(ctx, b.ledger, c.Queue, c.ID, err, attempt.Decide(end))
	if outcome.To == jobs.Pending {
		outcome.RetryIn = 0 // asynq decides when the retry is delivered
	}
	if end.Lost {
		b.metrics.LeaseLost.WithLabelValues(ledger.Logical(c.Queue), kind).Inc()
	}
	if end.Malformed {
		b.metrics.Rejected.WithLabelValues(ledger.Logical(c.Queue), metrics.ReasonMalformed).Inc()
	}
	if errors.Is(err, fence.ErrStale) {
		b.metrics.Fenced.WithLabelValues(ledger.Logical(c.Queue), metrics.StageStorage).Inc()
		b.storageRefused(ctx, a, err, log)
	}
	rep := Report{Ran: true, Attempt: a, Err: err, State: outcome.To}
	if outcome.Defer {
		rep.State = jobs.Pending
	}
	defer func() { report(ctx, rep) }()
	// The outcome is committed even when asynq's context ended (a shutdown,
	// a timeout): only the token decides whether it still counts.
	com, cerr := b.complete(ctx, c, outcome)
	if cerr == nil {
		rep.Committed, rep.Refused = com.Applied, !com.Applied
		if com.Applied {
			rep.State = com.State
		}
	}
	if cerr != nil {
		log.Warn("outcome not committed; the job's lease will expire and its next delivery reconciles it", "error", cerr)
		return fmt.Errorf("asynqfence: complete: %w", cerr)
	}
	if !com.Applied {
		b.metrics.Fenced.WithLabelValues(ledger.Logical(c.Queue), metrics.StageCommit).Inc()
		why := "a newer attempt owns the job"
		switch {
		case com.State == "missing" || com.State == "corrupt": // complete.lua's words for no or no job's state
			why = "the job's record is gone or corrupt"
		case com.Current == c.Token:
			// No attempt ran since: the job left running under this
			// token (its lease expired: uncertain, maybe reconciled).
			why = "the job left running under this attempt's token before the commit (its lease expired) and no newer attempt ran"
		}
		log.Warn("stale outcome refused by the ledger: "+why,
			"job_state", com.State, "current_token", com.Current.String(), "outcome", outcome.To, "error", errText(err))
		if com.State == "missing" && outcome.To != jobs.Succeeded && outcome.To != jobs.Cancelled {
			// The job vanished under a failed (or uncertain) attempt:
			// nothing else will deliver it again, so asynq must
			// keep the task; its next delivery records the job afresh.
			// asynq.SkipRetry in the handler's error still archives it.
			log.Warn("the ledger lost the job of an attempt that did not succeed; asynq delivers the task again",
				"outcome", outcome.To, "error", errText(err))
			return fmt.Errorf("%w: job %s in queue %s (attempt outcome %s): %w", ErrGone, c.ID, c.Queue, outcome.To, errOr(err))
		}
		if com.State.Final() || com.State == "missing" {
			return nil
		}
		// The job is not finished: asynq must keep the task. The attempt
		// that owns the job may have no delivery of its own (a Redis
		// failover can rewind the ledger to an attempt no process runs
		// any more); acknowledging this delivery would finish the task
		// and leave the job running or uncertain with nothing to deliver
		// it again. The task's next delivery finds the job busy, final,
		// or expired and reconciled first.
		if com.Current == c.Token {
			return fmt.Errorf("%w: job %s is %s under this attempt's token %s (its lease expired before the commit)", ErrSuperseded, c.ID, com.State, com.Current)
		}
		return fmt.Errorf("%w: job %s is %s under a newer attempt's token %s", ErrSuperseded, c.ID, com.State, com.Current)
	}
	b.metrics.Completed.WithLabelValues(ledger.Logical(c.Queue), kind, string(com.State)).Inc()
	b.metrics.Duration.WithLabelValues(ledger.Logical(c.Queue), kind, string(com.State)).Observe(elapsed.Seconds())
	switch com.State {
	case jobs.Succeeded:
		log.Debug("job succeeded")
		return nil
	case jobs.Dead:
		reason := outcome.Reason
		if reason == "" {
			reason = "retries exhausted" // a retry the ledger refused past the limit, with its reason
		}
		log.Warn("job dead", "reason", reason, "error", errText(err))
		return fmt.Errorf("asynqfence: job dead (%s): %w: %w", reason, errOr(err), asynq.SkipRetry)
	case jobs.Cancelled:
		log.Info("job cancelled", "error", errText(err))
		return fmt.Errorf("asynqfence: %w: %w", errCancelled, asynq.SkipRetry)
	case jobs.Uncertain:
		log.Warn("job uncertain; its next delivery reconciles it first", "reason", outcome.Reason, "error", errText(err))
		return fmt.Errorf("%w: %s: %w", ErrUncertain, outcome.Reason, errOr(err))
	}
	log.Info("job failed; asynq retries it", "error", errText(err))
	return fmt.Errorf("asynqfence: retry: %w", errOr(err))
}

// complete commits the outcome of attempt c, for up to 10 s. A commit
// whose result is unknown (Redis unreachable, its reply lost, or in durable
// mode too few replicas acknowledged it) is sent again until it has one,
// as a pool's completer does: a retry that finds the job ended by this
// token as the outcome ends it (the first try applied; in durable mode the
// retry's wait covers its writes) reports it applied.
func (b *Bridge) complete(ctx context.Context, c ledger.Claimed, outcome ledger.Outcome) (ledger.Committed, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cs := []ledger.Completion{{ID: c.ID, Token: c.Token, Outcome: outcome}}
	retried := false
	want := outcome.To
	if outcome.Defer {
		want = jobs.Pending
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		out, err := b.ledger.Complete(cctx, c.Queue, cs)
		if err == nil {
			com := out[0]
			if retried && !com.Applied && com.Current == c.Token && attempt.Reached(want, com.State) {
				com.Applied = true
			}
			return com, nil
		}
		if errors.Is(err, jobs.ErrInvalid) || cctx.Err() != nil {
			return ledger.Committed{}, err
		}
		retried = true
		select {
		case <-cctx.Done():
			return ledger.Committed{}, err
		case <-time.After(backoff):
		}
	}
}

// storageRefused records a storage refusal of the attempt (its error
// matches fence.ErrStale) in the ledger, where the dashboard shows it with
// the queue's fenced rejections, and, when storage refused the attempt's
// own fence with a higher stored token (one a Redis failover made the
// ledger forget), makes the job's next token mint above it, before the
// outcome is committed, so the redelivery that follows is accepted. A mark
// no counter mints (attempt.PlausibleMark) is logged, not fed back.
func (b *Bridge) storageRefused(ctx context.Context, a Attempt, err error, log *slog.Logger) {
	mark, ok := attempt.StorageMark(err, fence.Fence{Resource: a.Resource, Token: a.Token, Owner: a.Owner, OperationID: a.OperationID})
	if ok && !attempt.PlausibleMark(mark, a.Token, time.Now()) {
		log.Warn("storage refused the attempt's token with a mark no fencedq counter mints (a buggy or hostile storage?); the job's token is not raised to it",
			"storage_token", mark.String())
		ok = false
	}
	if !ok {
		mark = 0
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	recorded, err := b.ledger.StorageRefused(rctx, a.Queue, a.ID, a.Token, mark)
	if err != nil {
		log.Warn("storage refused the attempt's token; recording it (and raising the job's token above storage's) failed",
			"error", err)
		return
	}
	if recorded {
		log.Warn("storage holds a higher token than this attempt's (lost by a Redis failover?); the next attempt mints above it",
			"storage_token", mark.String())
	}
}

// errText is err's text for a log line, cut as the job's record keeps it
// (ledger.CapError): an error quoting a whole response body must not
// flood the log.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return ledger.CapError(err.Error())
}

func errOr(err error) error {
	if err == nil {
		return errors.New("no error")
	}
	return err
}

// retriesOnTimeout reports whether t's handler says its effects are safe to
// repeat after a timeout (jobs.RetryOnTimeout).
func retriesOnTimeout(t *asynq.Task, next asynq.Handler) bool {
	h := next
	if mux, ok := next.(*asynq.ServeMux); ok {
		h, _ = mux.Handler(t)
	}
	r, ok := h.(jobs.RetryOnTimeout)
	return ok && r.RetryOnTimeout()
}

// safeRun calls the handler, turning a panic into a retryable error. An
// error whose Error method panics (a nil pointer of an error type) is a
// panic of the handler's too, not one where the outcome is decided.
func (b *Bridge) safeRun(ctx context.Context, t *asynq.Task, next asynq.Handler, queue, kind string, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b.metrics.Panics.WithLabelValues(ledger.Logical(queue), kind).Inc()
			log.Error("handler panicked", "panic", ledger.CapError(fmt.Sprint(r)), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	err = next.ProcessTask(ctx, t)
	if err != nil {
		_ = err.Error()
	}
	return err
}

// renewer keeps one attempt's ledger lease alive while its handler runs and
// cancels the handler's context, with a cause matching lease.ErrLost, the
// moment the lease is lost; its watchdog cancels it when the lease cannot be
// confirmed before its local deadline.
type renewer struct {
	local watchdog.Watchdog
	done  chan struct{}
	wg    sync.WaitGroup
}

// stop ends renewing; once it returns, the handler's context is cancelled
// by neither the renewer nor the watchdog.
func (r *renewer) stop() {
	close(r.done)
	r.wg.Wait()
	r.local.Stop()
}

func (b *Bridge) startRenewer(c ledger.Claimed, sent time.Time, cancel context.CancelCauseFunc, log *slog.Logger) *renewer {
	ttl := b.opts.LeaseTTL
	r := &renewer{done: make(chan struct{})}
	r.local.Start(sent, ttl, b.margin, cancel, errLocalDeadline)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-tick.C:
			}
			if !time.Now().Before(r.local.Deadline()) {
				return // the watchdog cancels the handler's context
			}
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(context.Background(), ttl/3)
			rs, err := b.ledger.Renew(rctx, c.Queue, ttl, []ledger.Attempt{{ID: c.ID, Token: c.Token}})
			rcancel()
			if err != nil {
				log.Warn("lease renewal failed", "error", err)
				continue
			}
			switch rs[0].Status {
			case ledger.Lost:
				b.metrics.Fenced.WithLabelValues(ledger.Logical(c.Queue), metrics.StageRenew).Inc()
				cancel(fmt.Errorf("%w: the ledger says the job is %s under another token", lease.ErrLost, rs[0].State))
				return
			case ledger.CancelRequested:
				cancel(errCancelled)
			}
			r.local.Confirm(sent)
		}
	}()
	return r
}
