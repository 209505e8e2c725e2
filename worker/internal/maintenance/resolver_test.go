package maintenance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// answer is a kind's Reconcile that always says v.
func answer(v jobs.Verdict) ReconcileFunc {
	return func(context.Context, *jobs.Record) (jobs.Verdict, error) { return v, nil }
}

// decisions returns the decisions counted in queue q with result.
func (f *fixture) decisions(result string) float64 {
	return testutil.ToFloat64(f.metrics.Decisions.WithLabelValues(jobs.DefaultQueue, result))
}

// resolved returns the resolver's decision in id's history (nil: none).
func (f *fixture) resolved(id string) *jobs.Entry {
	f.t.Helper()
	h, err := f.ledger.History(f.ctx, jobs.DefaultQueue, id)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range h {
		if h[i].Event == "resolve" {
			return &h[i]
		}
	}
	return nil
}

// TestResolverPass: one pass reconciles every uncertain job due for a
// look by what its kind's Reconcile says (or that nothing can be asked):
// applied succeeds, not applied is re-run, cannot tell (and a Reconcile
// that panics) is looked at again later, nothing to ask goes to review.
// Each decision is in the job's history with the resolver's actor and
// evidence, counted by result, signalled and tallied; a job whose next
// look is later is left alone by the next pass.
func TestResolverPass(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	reconcilers := map[string]ReconcileFunc{
		"applied":     answer(jobs.Applied),
		"not-applied": answer(jobs.NotApplied),
		"unsure":      answer(jobs.CannotTell),
		"panics":      func(context.Context, *jobs.Record) (jobs.Verdict, error) { panic("reconcile exploded") },
	}
	cfg.Reconcile = func(kind string) ReconcileFunc { return reconcilers[kind] } // "opaque" has none
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	want := map[string]struct {
		state    jobs.State
		decision jobs.Decision
		note     string
	}{
		"applied":     {jobs.Succeeded, jobs.DecideSucceeded, "Reconcile answered applied"},
		"not-applied": {jobs.Pending, jobs.DecideRerun, "Reconcile answered not_applied"},
		"unsure":      {jobs.Uncertain, jobs.DecideLater, "Reconcile answered cannot_tell"},
		"panics":      {jobs.Uncertain, jobs.DecideLater, "reconcile exploded"},
		"opaque":      {jobs.Review, jobs.DecideReview, "no Reconcile method and no effect log"},
	}
	ids := map[string]string{}
	for kind := range want {
		ids[kind] = f.uncertain(kind, leader)
	}

	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	for kind, w := range want {
		id := ids[kind]
		rec := f.get(id)
		e := f.resolved(id)
		switch {
		case rec.State != w.state:
			t.Errorf("%s: state %s, want %s", kind, rec.State, w.state)
		case e == nil || e.Decision != string(w.decision) || e.Actor != "reconciler:pool-a" || !strings.Contains(e.Note, w.note):
			t.Errorf("%s: history decision %+v, want %s by reconciler:pool-a noting %q", kind, e, w.decision, w.note)
		case w.decision == jobs.DecideLater && rec.ReconcileTries != 1:
			t.Errorf("%s: %d reconcile tries, want 1", kind, rec.ReconcileTries)
		}
	}
	for result, n := range map[string]float64{
		jobs.Applied.String(): 1, jobs.NotApplied.String(): 1, jobs.CannotTell.String(): 2, metrics.ResultReview: 1,
	} {
		if v := f.decisions(result); v != n {
			t.Errorf("decisions %s: %v, want %v", result, v, n)
		}
	}
	if v := testutil.ToFloat64(f.metrics.ReconcileErrors); v != 1 {
		t.Errorf("reconcile errors %v, want 1 (the panic)", v)
	}
	if !f.logged(`"msg":"Reconcile failed"`, ids["panics"], "reconcile exploded") {
		t.Error("the panicking Reconcile was not logged")
	}
	if n := len(f.decided.WaitOrTimeoutN(len(want))); n != len(want) || l.resolver.tally.resolved.Load() != int64(len(want)) {
		t.Errorf("decisions signalled %d, tallied %d; want %d", n, l.resolver.tally.resolved.Load(), len(want))
	}

	// The jobs that cannot tell are due for another look an interval
	// (an hour here) later: the next pass decides nothing.
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if v := f.decisions(jobs.CannotTell.String()); v != 2 {
		t.Errorf("a second pass looked again at jobs due later: cannot_tell %v", v)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceResolver)); v != 0 {
		t.Errorf("resolver pass errors %v, want 0", v)
	}
}

// TestResolverReviewAfterMaxTries: a job whose kind keeps answering
// "cannot tell" goes to review on its MaxReconcileTries-th answer.
func TestResolverReviewAfterMaxTries(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.MaxReconcileTries = 2
	cfg.Reconcile = func(string) ReconcileFunc { return answer(jobs.CannotTell) }
	l := f.leader(cfg)
	l.resolver.interval = 0 // no backoff: each pass looks again
	leader := f.lead("pool-a")
	id := f.uncertain("unsure", leader)
	for pass, want := range []jobs.State{jobs.Uncertain, jobs.Review} {
		if err := l.resolver.runOnce(f.ctx, leader); err != nil {
			t.Fatal(err)
		}
		if rec := f.get(id); rec.State != want {
			t.Fatalf("after pass %d: %s (%d tries), want %s", pass+1, rec.State, rec.ReconcileTries, want)
		}
	}
	if f.decisions(jobs.CannotTell.String()) != 1 || f.decisions(metrics.ResultReview) != 1 {
		t.Fatalf("decisions: cannot_tell %v, review %v; want 1 and 1", f.decisions(jobs.CannotTell.String()), f.decisions(metrics.ResultReview))
	}
}

// TestResolverAsksTheEffectLog: for a kind without Reconcile, the effect
// log answers: an operation found in it was applied, one missing was not.
func TestResolverAsksTheEffectLog(t *testing.T) {
	f := newFixture(t)
	store, err := redisfence.New(f.rdb, redisfence.Config{Namespace: f.ns})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.EffectLog = store
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	done := f.uncertain("transfer", leader)
	rec := f.get(done)
	effect := fence.Fence{Resource: "account:1", Token: rec.Token, Owner: rec.Owner, OperationID: rec.OperationID}
	if err := store.Apply(f.ctx, effect, redisfence.IncrBy(store.DataKey("account:1", "balance"), 5)); err != nil {
		t.Fatal(err)
	}
	notDone := f.uncertain("transfer", leader)

	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if st := f.get(done).State; st != jobs.Succeeded {
		t.Errorf("the job whose effect is in the log is %s, want succeeded", st)
	}
	if st := f.get(notDone).State; st != jobs.Pending {
		t.Errorf("the job whose effect is not in the log is %s, want pending (re-run)", st)
	}
	// The evidence names the effect's token, never with its owner: the
	// two authorise writes as the effect's holder.
	if e := f.resolved(done); e == nil || !strings.Contains(e.Note, "effect log: operation applied with token "+effect.Token.String()) ||
		strings.Contains(e.Note, effect.Owner) {
		t.Errorf("evidence %+v", e)
	}
}

// TestResolverStaleLeaderDecidesNothing: a deposed leader's pass (its
// token below the queue's high-water) ends with jobs.ErrStale and writes
// no decision.
func TestResolverStaleLeaderDecidesNothing(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.Reconcile = func(string) ReconcileFunc { return answer(jobs.Applied) }
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	id := f.uncertain("applied", leader) // the queue has seen leader's token
	if err := l.resolver.runOnce(f.ctx, leader-1); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("a pass under an older token: %v, want jobs.ErrStale", err)
	}
	if rec := f.get(id); rec.State != jobs.Uncertain || f.resolved(id) != nil {
		t.Fatalf("the deposed leader decided: %s, %+v", rec.State, f.resolved(id))
	}
	if v := f.decisions(jobs.Applied.String()) + testutil.ToFloat64(f.metrics.ReconcileErrors); v != 0 {
		t.Fatalf("a refused decision was counted (%v)", v)
	}
}

// TestResolverHungReconcileDoesNotStallThePass: a kind's Reconcile that
// ignores its context and never returns answers "cannot tell" once
// ReconcileTimeout passes (counted and logged as a failure), and the pass
// goes on to decide the other kinds' jobs.
func TestResolverHungReconcileDoesNotStallThePass(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.ReconcileTimeout = 100 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	reconcilers := map[string]ReconcileFunc{
		"hangs":   func(context.Context, *jobs.Record) (jobs.Verdict, error) { <-release; return jobs.Applied, nil },
		"applied": answer(jobs.Applied),
	}
	cfg.Reconcile = func(kind string) ReconcileFunc { return reconcilers[kind] }
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	hung := f.uncertain("hangs", leader)
	next := f.uncertain("hangs", leader)
	other := f.uncertain("applied", leader)

	done := make(chan error, 1)
	go func() { done <- l.resolver.runOnce(f.ctx, leader) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("a Reconcile that ignores its context stalled the resolver's pass (%v)", testsignal.Timeout())
	}
	// The pass reads the kind's two jobs in index order (their due times
	// may tie): the first is asked, and its answer times out.
	tried, skipped := hung, next
	if f.get(hung).ReconcileTries == 0 {
		tried, skipped = next, hung
	}
	if rec := f.get(tried); rec.State != jobs.Uncertain || rec.ReconcileTries != 1 {
		t.Errorf("the hung job is %s with %d tries, want uncertain with 1", rec.State, rec.ReconcileTries)
	}
	if e := f.resolved(tried); e == nil || !strings.Contains(e.Note, "did not return") {
		t.Errorf("the hung job's evidence %+v, want one saying Reconcile did not return", e)
	}
	if st := f.get(other).State; st != jobs.Succeeded {
		t.Errorf("the other job is %s, want succeeded", st)
	}
	// The kind's answer timed out once: its other job is not asked (and its
	// tries not spent) in this pass, so a kind whose dependency is down
	// holds up the others by one timeout per pass, not one per job.
	if rec := f.get(skipped); rec.State != jobs.Uncertain || rec.ReconcileTries != 0 || f.resolved(skipped) != nil {
		t.Errorf("the hung kind's next job is %s with %d tries, want uncertain and not looked at this pass", rec.State, rec.ReconcileTries)
	}
	if v := testutil.ToFloat64(f.metrics.ReconcileErrors); v != 1 {
		t.Errorf("reconcile errors %v, want 1", v)
	}
}

// TestResolverLeavesKindsReconciledElsewhere: a leader that has no
// Reconcile for a kind another live pool reconciles does not decide its
// uncertain jobs by the effect log (which answers only for kinds without
// Reconcile: "not applied" there would re-run an effect the kind's own
// Reconcile may find applied): it cannot tell, says which pools can, and
// looks again later. A kind no live pool reconciles is still answered by
// the effect log.
func TestResolverLeavesKindsReconciledElsewhere(t *testing.T) {
	f := newFixture(t)
	store, err := redisfence.New(f.rdb, redisfence.Config{Namespace: f.ns})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ledger.Heartbeat(f.ctx, ledger.PoolInfo{ID: "pool-b", Reconcilers: []string{"email"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.EffectLog = store
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	email := f.uncertain("email", leader)
	transfer := f.uncertain("transfer", leader)

	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if rec := f.get(email); rec.State != jobs.Uncertain || rec.ReconcileTries != 1 {
		t.Errorf("the job of a kind pool-b reconciles is %s with %d tries, want uncertain with 1 (not decided by the effect log)", rec.State, rec.ReconcileTries)
	}
	if e := f.resolved(email); e == nil || !strings.Contains(e.Note, "pool-b") {
		t.Errorf("evidence %+v, want one naming pool-b", e)
	}
	if st := f.get(transfer).State; st != jobs.Pending {
		t.Errorf("the job of a kind no pool reconciles is %s, want pending (the effect log said not applied)", st)
	}
}

// TestResolverEvidenceIsCapped: what a failing Reconcile says (an error
// quoting a whole response body, a panic) is kept in the job's history
// capped as an attempt's error is, and a panic's stack goes to the log
// only, not into every try's history entry.
func TestResolverEvidenceIsCapped(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	body := strings.Repeat("x", 100<<10)
	reconcilers := map[string]ReconcileFunc{
		"verbose": func(context.Context, *jobs.Record) (jobs.Verdict, error) {
			return jobs.CannotTell, errors.New("status 500: " + body)
		},
		"panics": func(context.Context, *jobs.Record) (jobs.Verdict, error) { panic("reconcile exploded") },
	}
	cfg.Reconcile = func(kind string) ReconcileFunc { return reconcilers[kind] }
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	verbose := f.uncertain("verbose", leader)
	panics := f.uncertain("panics", leader)
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if e := f.resolved(verbose); e == nil || len(e.Note) > ledger.MaxErrorLen+64 || !strings.Contains(e.Note, "status 500") {
		n := -1
		if e != nil {
			n = len(e.Note)
		}
		t.Errorf("the verbose Reconcile's evidence is %d bytes, want it capped near %d", n, ledger.MaxErrorLen)
	}
	if e := f.resolved(panics); e == nil || !strings.Contains(e.Note, "reconcile exploded") || strings.Contains(e.Note, "goroutine ") {
		t.Errorf("the panicking Reconcile's evidence %+v: want the panic without its stack", e)
	}
	if !f.logged(`"msg":"Reconcile failed"`, panics, "goroutine ") {
		t.Error("the panic's stack was not logged")
	}
}
