package maintenance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// resolve asks what happened to each uncertain job due for a look and
// decides.
func (s *Services) resolve(ctx context.Context, leader lease.Token) error {
	now, err := s.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	return s.eachQueue(ctx, "resolver", func(q string) error {
		ids, err := s.ledger.DueIDs(ctx, q, jobs.Uncertain, now, ResolveBatch)
		if err != nil {
			return err
		}
		recs, err := s.ledger.GetMany(ctx, q, jobs.Uncertain, ids)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if rec.State != jobs.Uncertain {
				continue
			}
			if err := s.decide(ctx, rec, leader); err != nil {
				if errors.Is(err, jobs.ErrStale) {
					return err // no longer the leader
				}
				s.cfg.Metrics.ReconcileErrors.Inc()
				s.log.Warn("reconcile decision failed", "queue", q, "job_id", rec.ID, "error", err)
			}
		}
		return nil
	})
}

// verdict asks the kind's Reconcile, else the effect log; asked is false
// when there is nothing to ask. A Reconcile that panics or fails answers
// "cannot tell".
func (s *Services) verdict(ctx context.Context, rec *jobs.Record) (v jobs.Verdict, evidence string, asked bool) {
	if f := s.cfg.Reconciler(rec.Kind); f != nil {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		v, err := safeReconcile(cctx, f, rec)
		if err != nil {
			s.cfg.Metrics.ReconcileErrors.Inc()
			s.log.Warn("Reconcile failed", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID, "kind", rec.Kind, "error", err)
			return jobs.CannotTell, "Reconcile failed: " + err.Error(), true
		}
		return v, "Reconcile answered " + v.String(), true
	}
	if el := s.cfg.EffectLog; el != nil {
		applied, ok, err := el.Applied(ctx, rec.OperationID)
		switch {
		case err != nil:
			return jobs.CannotTell, "effect log unavailable: " + err.Error(), true
		case ok:
			return jobs.Applied, fmt.Sprintf("effect log: operation applied with token %d by %s", applied.Token, applied.Owner), true
		default:
			return jobs.NotApplied, "effect log: operation not applied", true
		}
	}
	return jobs.CannotTell, "kind has no Reconcile method and the pool has no effect log", false
}

func safeReconcile(ctx context.Context, f ReconcileFunc, rec *jobs.Record) (v jobs.Verdict, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = jobs.CannotTell, fmt.Errorf("reconcile panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return f(ctx, rec)
}

func (s *Services) decide(ctx context.Context, rec *jobs.Record, leader lease.Token) error {
	v, evidence, asked := s.verdict(ctx, rec)
	res := jobs.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "reconciler:" + s.cfg.WorkerID, Note: evidence, Leader: leader}
	result := v.String()
	switch v {
	case jobs.Applied:
		res.Decision = jobs.DecideSucceeded
	case jobs.NotApplied:
		res.Decision = jobs.DecideRerun
	default:
		if !asked || rec.ReconcileTries+1 >= s.cfg.MaxTries {
			res.Decision = jobs.DecideReview
			result = "review"
		} else {
			res.Decision = jobs.DecideLater
			res.NextTry = time.Now().Add(s.cfg.Interval << min(rec.ReconcileTries+1, 10))
		}
	}
	state, err := s.ledger.Resolve(ctx, rec.Queue, rec.ID, res)
	if err != nil {
		return err
	}
	s.resolved.Add(1)
	s.cfg.Metrics.Decisions.WithLabelValues(rec.Queue, result).Inc()
	s.log.Info("reconciled", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID,
		"kind", rec.Kind, "token", rec.Token.String(), "decision", res.Decision, "state", state, "evidence", evidence)
	return nil
}
