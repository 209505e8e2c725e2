package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/fenceout"
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
	leases    *lease.Manager // fences out an uncertain attempt's named resource (fenceout.Attempt)
	reconcile func(kind string) ReconcileFunc
	// retryDelay gives the delay before the retry of an attempt found not
	// applied (nil: none).
	retryDelay func(n int) time.Duration
	tally      *tally
	decided    *testsignal.Signal[Decision]
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
	pass := &resolvePass{slow: map[string]bool{}}
	return r.eachOf(ctx, qs, func(i int, q string) error {
		if waits[i] != 0 {
			return nil
		}
		ids, err := r.ledger.DueIDs(ctx, q, jobs.Uncertain, now, r.batch)
		if err != nil {
			return err
		}
		recs, err := r.ledger.GetManyDropLost(ctx, q, jobs.Uncertain, ids)
		if err != nil {
			return err
		}
		r.reportLost(q, ids, recs)
		for _, rec := range recs {
			if ctx.Err() != nil {
				return ctx.Err() // the leadership ended: ask nothing more
			}
			if rec.State != jobs.Uncertain || pass.slow[rec.Kind] {
				continue // a kind whose answer timed out this pass: looked at next pass
			}
			if err := r.decide(ctx, rec, leader, pass); err != nil {
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

// resolvePass is what one resolver pass learns as it goes: the live pools
// that have a Reconcile, by kind (read once, when a kind without Reconcile
// here needs them), and the kinds whose Reconcile (or effect log read) ran
// out of time: the pass asks nothing more about them, so one kind whose
// dependency is down does not hold up every other kind's jobs by a
// timeout per job.
type resolvePass struct {
	read  bool
	err   error
	pools map[string][]string
	slow  map[string]bool
}

// reconcilers returns the live pools that have a Reconcile for kind.
func (rs *resolvePass) reconcilers(ctx context.Context, l *ledger.Ledger, kind string) ([]string, error) {
	if !rs.read {
		rs.read = true
		ps, err := l.Pools(ctx)
		rs.err = err
		rs.pools = map[string][]string{}
		for _, p := range ps {
			for _, k := range p.Reconcilers {
				rs.pools[k] = append(rs.pools[k], p.ID)
			}
		}
	}
	return rs.pools[kind], rs.err
}

// reportLost logs and counts the uncertain jobs of ids whose record is
// gone: GetManyDropLost returned none for them and removed their index
// entries.
func (r *resolver) reportLost(q string, ids []string, recs []*jobs.Record) {
	if len(recs) == len(ids) {
		return
	}
	found := make(map[string]bool, len(recs))
	for _, rec := range recs {
		found[rec.ID] = true
	}
	for _, id := range ids {
		if !found[id] {
			r.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonUnknownJob).Inc()
			r.log.Error(lostMsg, "queue", q, "job_id", id, "job_state", jobs.Uncertain)
		}
	}
}

// verdict asks the kind's Reconcile, else the effect log (see
// attempt.Verdict), once the attempt is fenced out of the log's store
// (fenceout.Attempt), whichever of the two answers: a Reconcile's "not
// applied" stays true of writes through that store as the log's does; a
// Reconcile that fails or panics, or an effect log that
// cannot be fenced or read, answers "cannot tell" and is counted, unless the
// leadership ended meanwhile (ctx done: the answer is not used). A kind
// without Reconcile here that another live pool reconciles (a pool that
// does not run the kind, or runs an older version of it, leads) is not
// answered by the effect log, which answers only for kinds without
// Reconcile: it cannot tell, and a leader that has the Reconcile decides.
func (r *resolver) verdict(ctx context.Context, rec *jobs.Record, pass *resolvePass) (jobs.Verdict, string, bool) {
	f := r.reconcile(rec.Kind)
	if f == nil {
		pools, err := pass.reconcilers(ctx, r.ledger, rec.Kind)
		switch {
		case err != nil:
			r.metrics.ReconcileErrors.Inc()
			r.log.Warn("reading which pools reconcile the kind failed", "queue", rec.Queue, "job_id", rec.ID, "kind", rec.Kind, "error", err)
			return jobs.CannotTell, "the pools could not be read to find one with a Reconcile for the kind: " + err.Error(), true
		case len(pools) > 0:
			return jobs.CannotTell, fmt.Sprintf("the maintenance leader %s has no Reconcile for the kind, which pools %s have: one of them must lead (not Maintenance.Disabled) to ask it",
				r.workerID, strings.Join(pools, ", ")), true
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	out := func(ctx context.Context) error {
		fr, _ := r.effectLog.(fence.Fencer) // nil: a log that cannot raise marks
		return fenceout.Attempt(ctx, rec, fr, r.leases, "reconciler:"+r.workerID)
	}
	v, evidence, asked, failure := attempt.Verdict(cctx, rec, f, r.effectLog, out)
	if cctx.Err() != nil && ctx.Err() == nil {
		pass.slow[rec.Kind] = true
	}
	if failure != nil && ctx.Err() == nil {
		r.metrics.ReconcileErrors.Inc()
		args := []any{"queue", rec.Queue, "job_id", rec.ID, "operation_id", rec.OperationID, "kind", rec.Kind, "error", evidence}
		if stack := attempt.Stack(failure); stack != "" {
			args = append(args, "stack", stack)
		}
		r.log.Warn("Reconcile failed", args...)
	}
	return v, evidence, asked
}

func (r *resolver) decide(ctx context.Context, rec *jobs.Record, leader lease.Token, pass *resolvePass) error {
	v, evidence, asked := r.verdict(ctx, rec, pass)
	if err := ctx.Err(); err != nil {
		return err // the leadership ended mid-call: its answer is not decided on
	}
	// The actor names the resolver's decisions in the job's history as it
	// always has ("reconciler:<pool>"); readers of old histories match it.
	// The verdict is about rec's attempt: a job that ran again meanwhile (an
	// operator's re-run, then another uncertain end) is not decided by it.
	res := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Actor: "reconciler:" + r.workerID, Note: evidence,
		Leader: leader, Seen: &rec.Token}
	result := attempt.Resolve(&res, v, asked, rec.ReconcileTries, r.maxTries, r.interval, func() time.Duration {
		if r.retryDelay == nil || rec.Attempts > rec.MaxRetries {
			return 0 // none, or no retry: the ledger ends the job dead
		}
		return r.retryDelay(rec.Attempts)
	})
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
