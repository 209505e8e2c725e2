package asynqfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/fenceout"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// reconcilerFor returns what can tell whether t's effect happened: next's
// own ReconcileTask (next is the task's handler, or a ServeMux routing to
// it), else Options.Reconcile.
func (b *Bridge) reconcilerFor(t *asynq.Task, next asynq.Handler) ReconcileFunc {
	h := next
	if mux, ok := next.(*asynq.ServeMux); ok {
		h, _ = mux.Handler(t)
	}
	if r, ok := h.(TaskReconciler); ok {
		return r.ReconcileTask
	}
	if b.opts.Reconcile != nil {
		return b.opts.Reconcile(t.Type())
	}
	return nil
}

// verdict asks the kind's Reconcile, else the effect log, once the attempt
// is fenced out of the log's store, exactly as the native reconciler does
// (attempt.Verdict, fenceout.Attempt); asked is false when there is
// nothing to ask.
func (b *Bridge) verdict(ctx context.Context, rec *jobs.Record, f ReconcileFunc) (jobs.Verdict, string, bool) {
	cctx, cancel := context.WithTimeout(ctx, b.opts.ReconcileTimeout)
	defer cancel()
	// A bridged attempt's resource is its job: no lease to take.
	out := func(ctx context.Context) error {
		fr, _ := b.opts.EffectLog.(fence.Fencer) // nil: a log that cannot raise marks
		return fenceout.Attempt(ctx, rec, fr, nil, "bridge:"+b.opts.WorkerID)
	}
	v, evidence, asked, failure := attempt.Verdict(cctx, rec, f, b.opts.EffectLog, out)
	if failure != nil {
		b.metrics.ReconcileErrors.Inc()
	}
	return v, evidence, asked
}

// reconcile decides an uncertain job before its task runs again: applied
// (succeeded; the delivery is acknowledged), not applied (a failed
// attempt: with attempts left, rerun is true and the caller claims it; a
// job an operator asked to cancel ends cancelled instead, and the claim
// acknowledges it; with its attempts spent the job is dead and asynq
// archives the task), or cannot tell (another look at asynq's
// next delivery, review after MaxReconcileTries answers). Decisions are the
// native reconciler's, with its evidence and metrics; the actor is
// "bridge:<worker id>".
func (b *Bridge) reconcile(ctx context.Context, q, id string, t *asynq.Task, next asynq.Handler, tries int, log *slog.Logger) (rerun bool, err error) {
	rec, err := b.ledger.Get(ctx, q, id)
	if err != nil {
		return false, fmt.Errorf("asynqfence: reconcile: %w", err)
	}
	if rec.State != jobs.Uncertain {
		return true, nil // decided meanwhile: look again
	}
	// Reconcile gets the delivering task's headers (a tenant id, a trace
	// context), as the handler does, not those the record kept of the
	// job's first task.
	rec.Headers = maps.Clone(t.Headers())
	v, evidence, asked := b.verdict(ctx, rec, b.reconcilerFor(t, next))
	res := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "bridge:" + b.opts.WorkerID, Note: evidence, Seen: &rec.Token}
	// Not applied is a failed attempt: asynq's redelivery already waited
	// its retry delay, and one whose attempts are spent goes dead.
	result := attempt.Resolve(&res, v, asked, tries, b.opts.MaxReconcileTries, time.Second, func() time.Duration { return 0 })
	state, err := b.ledger.Decide(ctx, q, id, res)
	if errors.Is(err, jobs.ErrWrongState) {
		return true, nil // another reconciler decided first: look again
	}
	if err != nil {
		b.metrics.ReconcileErrors.Inc()
		return false, fmt.Errorf("asynqfence: reconcile: %w", err)
	}
	b.metrics.Decisions.WithLabelValues(ledger.Logical(q), result).Inc()
	log.Info("reconciled before redelivery", "operation_id", rec.OperationID, "token", rec.Token.String(),
		"decision", res.Decision, "state", state, "evidence", evidence)
	switch res.Decision {
	case jobs.DecideSucceeded:
		return false, nil
	case jobs.DecideRerun:
		if state == jobs.Dead {
			// the attempt found not applied was the last the task allows
			log.Warn("job dead: its last allowed attempt was found not applied", "evidence", evidence)
			return false, fmt.Errorf("asynqfence: job dead (retries exhausted: the last attempt was found not applied: %s): %w", evidence, asynq.SkipRetry)
		}
		return true, nil
	case jobs.DecideReview:
		return false, fmt.Errorf("%w: job %s in queue %s: %s: %w", ErrReview, id, q, evidence, asynq.SkipRetry)
	}
	return false, fmt.Errorf("%w: job %s in queue %s: %s", ErrUncertain, id, q, evidence)
}
