package maintenance

import (
	"context"
	"errors"

	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
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

// verdict asks the kind's Reconcile, else the effect log (see
// attempt.Verdict); a Reconcile that fails or panics answers "cannot tell"
// and is counted.
func (s *Services) verdict(ctx context.Context, rec *jobs.Record) (jobs.Verdict, string, bool) {
	f := s.cfg.Reconciler(rec.Kind)
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	v, evidence, asked, failed := attempt.Verdict(cctx, rec, f, s.cfg.EffectLog)
	if failed {
		s.cfg.Metrics.ReconcileErrors.Inc()
		s.log.Warn("Reconcile failed", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID, "kind", rec.Kind, "error", evidence)
	}
	return v, evidence, asked
}

func (s *Services) decide(ctx context.Context, rec *jobs.Record, leader lease.Token) error {
	v, evidence, asked := s.verdict(ctx, rec)
	res := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "reconciler:" + s.cfg.WorkerID, Note: evidence, Leader: leader}
	result := v.String()
	switch v {
	case jobs.Applied:
		res.Decision = jobs.DecideSucceeded
	case jobs.NotApplied:
		res.Decision = jobs.DecideRerun
	default:
		if !asked || rec.ReconcileTries+1 >= s.cfg.MaxTries {
			res.Decision = jobs.DecideReview
			result = metrics.ResultReview
		} else {
			res.Decision = jobs.DecideLater
			res.NextIn = s.cfg.Interval << min(rec.ReconcileTries+1, 10)
		}
	}
	state, err := s.ledger.Decide(ctx, rec.Queue, rec.ID, res)
	if err != nil {
		return err
	}
	s.resolved.Add(1)
	s.cfg.Metrics.Decisions.WithLabelValues(rec.Queue, result).Inc()
	s.log.Info("reconciled", "queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID,
		"kind", rec.Kind, "token", rec.Token.String(), "decision", res.Decision, "state", state, "evidence", evidence)
	s.cfg.Decided.Signal(Decision{JobID: rec.ID, Result: result})
	return nil
}
