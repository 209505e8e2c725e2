package maintenance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestResolverVerdictIsForTheAttemptItAsked: a verdict is about the
// attempt the resolver asked about. While a slow Reconcile answers about
// attempt T1, an operator re-runs the job and a new attempt T2 ends
// uncertain too (its effect may have happened): T1's "not applied" must
// not re-run the job over T2's unknown outcome. The decision is refused
// and the job stays uncertain for a look at T2.
func TestResolverVerdictIsForTheAttemptItAsked(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	leader := f.lead("pool-a")
	var id string
	var t2 jobs.Record
	cfg.Reconcile = func(string) ReconcileFunc {
		return func(ctx context.Context, rec *jobs.Record) (jobs.Verdict, error) {
			if rec.Token == t2.Token {
				return jobs.CannotTell, nil // a later look at T2
			}
			// While T1 is being looked at: an operator re-runs the job, a
			// pool claims it (T2), and T2's handler reports an unknown
			// outcome.
			if _, err := f.client.Resolve(ctx, jobs.DefaultQueue, id, jobs.DecideRerun, "alice", "looks not applied"); err != nil {
				t.Error(err)
				return jobs.CannotTell, err
			}
			res, err := f.ledger.Claim(ctx, jobs.DefaultQueue, "worker-w", time.Minute, 1)
			if err != nil || len(res.Jobs) != 1 {
				t.Errorf("claim: %+v, %v", res, err)
				return jobs.CannotTell, err
			}
			t2.Token = res.Jobs[0].Token
			out, err := f.ledger.Complete(ctx, jobs.DefaultQueue, []ledger.Completion{{ID: id, Token: t2.Token,
				Outcome: ledger.Outcome{To: jobs.Uncertain, Error: "timeout", Reason: "handler reported an unknown outcome"}}})
			if err != nil || !out[0].Applied {
				t.Errorf("complete T2: %+v, %v", out, err)
			}
			return jobs.NotApplied, nil // T1's effect did not happen
		}
	}
	l := f.leader(cfg)
	id = f.uncertain("charge", leader)
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	rec := f.get(id)
	if rec.State != jobs.Uncertain || rec.Token != t2.Token {
		t.Fatalf("after T1's verdict the job is %s (token %d, T2 %d): T2's unknown outcome was decided by T1's evidence", rec.State, rec.Token, t2.Token)
	}
	if !f.logged("reconcile decision failed", id, "ran again since") {
		t.Error("the refused decision was not logged with the job id")
	}
}

// downLog is an effect log whose database is unreachable.
type downLog struct{}

func (downLog) Applied(context.Context, string) (fence.Effect, bool, error) {
	return fence.Effect{}, false, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
}

// TestResolverCountsAnUnreachableEffectLog: an effect log that cannot be
// read is a failed reconcile: the job is looked at again later (review
// after MaxReconcileTries), and each failure is counted in
// fencedq_reconcile_errors_total and logged at warning level with the job
// id and the error, as a failing Reconcile is.
func TestResolverCountsAnUnreachableEffectLog(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.EffectLog = downLog{}
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	id := f.uncertain("transfer", leader)
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if rec := f.get(id); rec.State != jobs.Uncertain || rec.ReconcileTries != 1 {
		t.Fatalf("job %s with %d tries, want uncertain with 1", rec.State, rec.ReconcileTries)
	}
	if v := testutil.ToFloat64(f.metrics.ReconcileErrors); v != 1 {
		t.Errorf("reconcile errors %v, want 1: the unreachable effect log is not counted", v)
	}
	if !f.logged(`"level":"WARN"`, id, "connection refused") {
		t.Error("the unreachable effect log was not logged at warning level with the job id and the error")
	}
}

// TestResolverStopsWhenLeadershipEnds: a pass whose leadership ends (its
// context cancelled) stops at once: it asks nothing more about the other
// jobs, and the calls cut short by the lost leadership are not counted or
// logged as failed reconciles (a routine hand-over must not raise
// fencedq_reconcile_errors_total).
func TestResolverStopsWhenLeadershipEnds(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	ctx, lose := context.WithCancel(f.ctx)
	defer lose()
	asked := 0
	cfg.Reconcile = func(string) ReconcileFunc {
		return func(rctx context.Context, _ *jobs.Record) (jobs.Verdict, error) {
			asked++
			lose() // the leader lease is lost while Reconcile runs
			<-rctx.Done()
			return jobs.CannotTell, rctx.Err()
		}
	}
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	var ids []string
	for range 3 {
		ids = append(ids, f.uncertain("slow", leader))
	}
	_ = l.resolver.runOnce(ctx, leader)
	if asked != 1 {
		t.Errorf("Reconcile asked %d times after the leadership ended, want 1", asked)
	}
	if v := testutil.ToFloat64(f.metrics.ReconcileErrors); v != 0 {
		t.Errorf("reconcile errors %v, want 0: the lost leadership was counted as failed reconciles", v)
	}
	for _, id := range ids {
		if rec := f.get(id); rec.State != jobs.Uncertain || rec.ReconcileTries != 0 {
			t.Errorf("job %s is %s with %d tries, want uncertain, untouched", id, rec.State, rec.ReconcileTries)
		}
	}
}
