package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// commitTimeout bounds the ledger commit after a handler returns; it runs
// even when the delivery's context was cancelled (shutdown).
const commitTimeout = 5 * time.Second

// process handles one asynq delivery. What it returns to asynq:
//
//   - nil: the ledger reached succeeded or uncertain, the delivery was a
//     duplicate (job already succeeded, dead, running elsewhere, uncertain or
//     in review), or the commit was stale (a newer attempt owns the job).
//     asynq forgets the task; the ledger (and the reconciler) own what follows.
//   - a plain error: the ledger scheduled a retry; asynq redelivers after
//     RetryDelay. Also returned when Redis fails before the claim.
//   - asynq.SkipRetry: the job is dead (permanent error, retries exhausted,
//     unknown kind, malformed payload) or the delivery names no job.
//   - errDeferred: the resource is held by another job; not counted as a
//     failure by asynq, redelivered within half a second.
func (p *Pool) process(ctx context.Context, t *asynq.Task) error {
	qname, _ := asynq.GetQueueName(ctx)
	queue := p.queueOf(qname)
	taskID, _ := asynq.GetTaskID(ctx)
	kind := t.Type()
	log := &jobLog{l: p.log, attrs: []any{"queue", queue, "kind", kind, "task", taskID}}

	var env jobs.Envelope
	if err := json.Unmarshal(t.Payload(), &env); err != nil || env.JobID == "" {
		p.metrics.Rejected.WithLabelValues(queue, metrics.ReasonMalformed).Inc()
		log.Error("delivery rejected: task payload is not a fencedq envelope", "error", errText(err))
		return fmt.Errorf("%w: malformed envelope", asynq.SkipRetry)
	}
	log.with("job_id", env.JobID)
	owner := p.cfg.WorkerID + "/" + env.JobID
	ttl := p.cfg.LeaseTTL

	// Resource lease first, when the kind names one.
	var resLease *lease.Lease
	var token lease.Token
	sent := time.Now()
	if env.Resource != "" {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.LeaseWait)
		l, err := p.leases.AcquireWait(wctx, env.Resource, owner, ttl)
		cancel()
		p.metrics.LeaseWait.WithLabelValues(queue, kind).Observe(time.Since(sent).Seconds())
		if errors.Is(err, lease.ErrHeld) {
			log.Debug("resource busy, delivery deferred", "resource", env.Resource)
			return errDeferred
		}
		if err != nil {
			log.Warn("resource lease failed", "error", err)
			return err
		}
		resLease, token = l, l.Token
		sent = time.Now()
	}
	release := func() {
		if resLease != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			defer cancel()
			_ = p.leases.Release(rctx, resLease)
		}
	}

	claim, err := p.ledger.Claim(ctx, queue, env.JobID, owner, ttl, token, taskID)
	if err != nil {
		release()
		return p.notClaimed(log, queue, err)
	}
	log.with("operation_id", claim.OperationID, "attempt", claim.Attempt, "token", claim.Token.String())
	p.metrics.Attempted.WithLabelValues(queue, kind).Inc()

	h := p.handlerFor(kind)
	var outcome jobs.Outcome
	var handlerErr error
	start := time.Now()
	if h == nil {
		p.metrics.Rejected.WithLabelValues(queue, metrics.ReasonUnknownKind).Inc()
		handlerErr = fmt.Errorf("no worker registered for kind %q in pool %s", kind, p.cfg.WorkerID)
		outcome = jobs.Outcome{To: jobs.Dead, Error: handlerErr.Error(), Reason: "unknown kind"}
	} else {
		outcome, handlerErr = p.runAttempt(ctx, log, h, queue, env, claim, owner, resLease, sent)
	}
	elapsed := time.Since(start)

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	state, err := p.ledger.Commit(cctx, queue, env.JobID, claim.OperationID, claim.Token, outcome)
	cancel()
	release()
	switch {
	case errors.Is(err, jobs.ErrStale):
		p.metrics.Fenced.WithLabelValues(queue, metrics.StageCommit).Inc()
		log.Warn("commit rejected: a newer attempt owns the job; this attempt's outcome is discarded",
			"wanted", outcome.To, "job_state", state, "handler_error", errText(handlerErr))
		return nil
	case err != nil:
		log.Error("commit failed with an unknown result; the reconciler resolves the job after its lease expires",
			"wanted", outcome.To, "error", err)
		return nil
	}
	p.metrics.Completed.WithLabelValues(queue, kind, string(state)).Inc()
	p.metrics.Duration.WithLabelValues(queue, kind, string(state)).Observe(elapsed.Seconds())
	attrs := []any{"state", state, "duration", elapsed}
	if handlerErr != nil {
		attrs = append(attrs, "error", handlerErr.Error())
	}
	if outcome.Reason != "" {
		attrs = append(attrs, "reason", outcome.Reason)
	}
	switch state {
	case jobs.Succeeded:
		log.Debug("job succeeded", attrs...)
		return nil
	case jobs.Uncertain:
		log.Warn("job outcome uncertain; the reconciler will resolve it", attrs...)
		return nil
	case jobs.Dead:
		log.Error("job dead", attrs...)
		return fmt.Errorf("%w: %s", asynq.SkipRetry, outcome.Reason)
	default:
		log.Warn("job failed, retry scheduled", attrs...)
		return fmt.Errorf("job %s attempt %d failed: %w", env.JobID, claim.Attempt, handlerErr)
	}
}

// notClaimed explains a delivery that found its job not pending.
func (p *Pool) notClaimed(log *jobLog, queue string, err error) error {
	var nc *jobs.NotClaimable
	if !errors.As(err, &nc) {
		log.Warn("claim failed; asynq will redeliver", "error", err)
		return err
	}
	switch nc.State {
	case "succeeded", "dead":
		p.metrics.Deduplicated.WithLabelValues(queue, metrics.StageExecute).Inc()
		log.Info("duplicate delivery acknowledged without running the handler", "job_state", nc.State)
		return nil
	case "missing":
		p.metrics.Rejected.WithLabelValues(queue, metrics.ReasonUnknownJob).Inc()
		log.Error("delivery names no job in the ledger (expired or never enqueued through fencedq)")
		return fmt.Errorf("%w: unknown job", asynq.SkipRetry)
	default: // running elsewhere, uncertain, review, stale
		log.Info("delivery acknowledged: the job is owned elsewhere", "job_state", nc.State, "job_token", nc.Token.String())
		return nil
	}
}

// runAttempt runs the handler under the attempt's lease and decides the
// outcome to commit.
func (p *Pool) runAttempt(ctx context.Context, log *jobLog, h *handler, queue string, env jobs.Envelope,
	claim *jobs.Claim, owner string, resLease *lease.Lease, sent time.Time) (jobs.Outcome, error) {
	timeout := claim.Timeout
	if timeout <= 0 {
		timeout = p.cfg.HandlerTimeout
	}
	deadline := time.Now().Add(timeout)
	// The keep-alive stops at the handler's deadline: a handler that ignores
	// its context then loses the lease and the reconciler takes over.
	kctx, kcancel := context.WithDeadline(ctx, deadline)
	defer kcancel()
	resource := env.Resource
	if resource == "" {
		resource = "job:" + env.JobID
	}
	renew := func(rctx context.Context) error {
		if resLease != nil {
			if err := p.leases.Renew(rctx, resLease, p.cfg.LeaseTTL); err != nil {
				return err
			}
		}
		if _, err := p.ledger.Renew(rctx, queue, env.JobID, claim.Token, p.cfg.LeaseTTL); err != nil {
			if errors.Is(err, jobs.ErrStale) {
				p.metrics.Fenced.WithLabelValues(queue, metrics.StageRenew).Inc()
				return fmt.Errorf("%w: %w", lease.ErrLost, err)
			}
			return err
		}
		return nil
	}
	session, err := lease.Keep(kctx, p.cfg.LeaseTTL, 0, sent, renew)
	if err != nil {
		return jobs.Outcome{To: jobs.Pending, Error: err.Error(), RetryAt: time.Now()}, err
	}
	defer session.Stop()

	hctx, hcancel := context.WithDeadline(session.Context(), deadline)
	defer hcancel()
	f := fence.Fence{Resource: resource, Token: claim.Token, Owner: owner, OperationID: claim.OperationID}
	hctx = fence.NewContext(hctx, f)
	hctx = lease.NewContext(hctx, &lease.Lease{Resource: resource, Owner: owner, Token: claim.Token, Deadline: claim.Deadline})
	base := jobs.Job[jobs.JobArgs]{
		ID: env.JobID, Kind: h.kind, Queue: queue, OperationID: claim.OperationID, Attempt: claim.Attempt,
		MaxRetries: claim.MaxRetries, Resource: resource, Token: claim.Token, Owner: owner, Deadline: deadline,
	}

	err = p.safeRun(hctx, log, h, queue, base, claim.Payload)
	lost := session.Lost()
	if lost {
		p.metrics.LeaseLost.WithLabelValues(queue, h.kind).Inc()
	}
	timedOut := errors.Is(hctx.Err(), context.DeadlineExceeded) && !time.Now().Before(deadline)
	if errors.Is(err, fence.ErrStale) { // *fence.StaleError matches too
		p.metrics.Fenced.WithLabelValues(queue, metrics.StageStorage).Inc()
	}
	switch {
	case err == nil:
		return jobs.Outcome{To: jobs.Succeeded}, nil
	case errors.Is(err, errMalformed):
		p.metrics.Rejected.WithLabelValues(queue, metrics.ReasonMalformed).Inc()
		return jobs.Outcome{To: jobs.Dead, Error: err.Error(), Reason: "malformed payload"}, err
	case errors.Is(err, jobs.ErrPermanent):
		return jobs.Outcome{To: jobs.Dead, Error: err.Error(), Reason: "permanent error"}, err
	case errors.Is(err, fence.ErrStale):
		// Storage saw a newer token: this attempt is superseded, its effect was
		// refused. Record it as a retry; if a newer attempt owns the job the
		// commit itself is rejected.
		return jobs.Outcome{To: jobs.Pending, Error: err.Error(), RetryAt: time.Now().Add(p.cfg.RetryDelay(claim.Attempt))}, err
	case errors.Is(err, jobs.ErrUnknown):
		return jobs.Outcome{To: jobs.Uncertain, Error: err.Error(), Reason: "handler reported an unknown outcome"}, err
	case lost:
		return jobs.Outcome{To: jobs.Uncertain, Error: err.Error(), Reason: "lease lost mid-call: " + errText(session.Err())}, err
	case timedOut && !h.retryOnTimeout:
		return jobs.Outcome{To: jobs.Uncertain, Error: err.Error(), Reason: "deadline passed mid-call"}, err
	case ctx.Err() != nil:
		return jobs.Outcome{To: jobs.Uncertain, Error: err.Error(), Reason: "worker shut down mid-call"}, err
	}
	return jobs.Outcome{To: jobs.Pending, Error: err.Error(), RetryAt: time.Now().Add(p.cfg.RetryDelay(claim.Attempt))}, err
}

// safeRun calls the handler, turning a panic into a retryable error.
func (p *Pool) safeRun(ctx context.Context, log *jobLog, h *handler, queue string, base jobs.Job[jobs.JobArgs], payload []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.metrics.Panics.WithLabelValues(queue, h.kind).Inc()
			log.Error("handler panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h.run(ctx, base, payload)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// jobLog logs with a job's attributes; they are only formatted when a line
// is actually written, so a quiet logger costs nothing per job.
type jobLog struct {
	l     *slog.Logger
	attrs []any
}

func (j *jobLog) with(args ...any) { j.attrs = append(j.attrs, args...) }

func (j *jobLog) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !j.l.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, len(j.attrs)+len(args))
	j.l.Log(ctx, level, msg, append(append(all, j.attrs...), args...)...)
}

// Debug logs at debug level.
func (j *jobLog) Debug(msg string, args ...any) { j.log(slog.LevelDebug, msg, args...) }

// Info logs at info level.
func (j *jobLog) Info(msg string, args ...any) { j.log(slog.LevelInfo, msg, args...) }

// Warn logs at warn level.
func (j *jobLog) Warn(msg string, args ...any) { j.log(slog.LevelWarn, msg, args...) }

// Error logs at error level.
func (j *jobLog) Error(msg string, args ...any) { j.log(slog.LevelError, msg, args...) }
