package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// ResolveBatch bounds how many uncertain jobs one pass looks at per queue.
const ResolveBatch = 50

// resolver reconciles uncertain jobs: it asks what happened to each one
// due for a look and decides.
type resolver struct {
	service
	// interval is the pass interval and the base of the backoff between
	// two looks at a job that "cannot tell".
	interval  time.Duration
	batch     int
	workerID  string
	maxTries  int
	timeout   time.Duration // bound on one Reconcile call
	effectLog fence.EffectLog
	reconcile func(kind string) ReconcileFunc
	tally     *tally
	decided   *testsignal.Signal[Decision]
}

// runOnce is one pass over every queue's uncertain jobs due for a look. A
// decision that fails for one job is logged and counted
// (fencedq_reconcile_errors_total) and the other jobs go on.
func (r *resolver) runOnce(ctx context.Context, leader lease.Token) error {
	now, err := r.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	qs, err := r.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	// One round trip shows which queues have an uncertain job due for a
	// look; only those are read.
	waits, err := r.ledger.FirstUncertain(ctx, qs)
	if err != nil {
		return err
	}
	return r.eachOf(ctx, qs, func(i int, q string) error {
		if waits[i] != 0 {
			return nil
		}
		ids, err := r.ledger.DueIDs(ctx, q, jobs.Uncertain, now, r.batch)
		if err != nil {
			return err
		}
		recs, err := r.ledger.GetMany(ctx, q, jobs.Uncertain, ids)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if ctx.Err() != nil {
				return ctx.Err() // the leadership ended: ask nothing more
			}
			if rec.State != jobs.Uncertain {
				continue
			}
			if err := r.decide(ctx, rec, leader); err != nil {
				if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
					return err // no longer the leader
				}
				r.metrics.ReconcileErrors.Inc()
				r.log.Warn("reconcile decision failed", "queue", q, "job_id", rec.ID, "error", err)
			}
		}
		return nil
	})
}

// verdict asks the kind's Reconcile, else the effect log (see
// attempt.Verdict); a Reconcile that fails or panics, or an effect log that
// cannot be read, answers "cannot tell" and is counted, unless the
// leadership ended meanwhile (ctx done: the answer is not used).
func (r *resolver) verdict(ctx context.Context, rec *jobs.Record) (jobs.Verdict, string, bool) {
	f := r.reconcile(rec.Kind)
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, evidence, asked, failed := attempt.Verdict(cctx, rec, f, r.effectLog)
	if failed && ctx.Err() == nil {
		r.metrics.ReconcileErrors.Inc()
		r.log.Warn("Reconcile failed", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID, "kind", rec.Kind, "error", evidence)
	}
	return v, evidence, asked
}

func (r *resolver) decide(ctx context.Context, rec *jobs.Record, leader lease.Token) error {
	v, evidence, asked := r.verdict(ctx, rec)
	if err := ctx.Err(); err != nil {
		return err // the leadership ended mid-call: its answer is not decided on
	}
	// The actor names the resolver's decisions in the job's history as it
	// always has ("reconciler:<pool>"); readers of old histories match it.
	// The verdict is about rec's attempt: a job that ran again meanwhile (an
	// operator's re-run, then another uncertain end) is not decided by it.
	res := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "reconciler:" + r.workerID, Note: evidence,
		Leader: leader, Seen: &rec.Token}
	result := v.String()
	switch v {
	case jobs.Applied:
		res.Decision = jobs.DecideSucceeded
	case jobs.NotApplied:
		res.Decision = jobs.DecideRerun
	default:
		if !asked || rec.ReconcileTries+1 >= r.maxTries {
			res.Decision = jobs.DecideReview
			result = metrics.ResultReview
		} else {
			res.Decision = jobs.DecideLater
			res.NextIn = r.interval << min(rec.ReconcileTries+1, 10)
		}
	}
	state, err := r.ledger.Decide(ctx, rec.Queue, rec.ID, res)
	if err != nil {
		return err
	}
	r.tally.resolved.Add(1)
	r.metrics.Decisions.WithLabelValues(ledger.Logical(rec.Queue), result).Inc()
	r.log.Info("reconciled", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID,
		"kind", rec.Kind, "token", rec.Token.String(), "decision", res.Decision, "state", state, "evidence", evidence)
	r.decided.Signal(Decision{JobID: rec.ID, Result: result})
	return nil
}
