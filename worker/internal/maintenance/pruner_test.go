package maintenance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestPrunerPass: a pass drops the index entries of finished jobs that
// finished longer ago than the retention, and keeps those within it and
// every job not finished; an effect pruner is asked on every pass.
func TestPrunerPass(t *testing.T) {
	rdb, ns := redistest.New(t)
	f := newFixtureOn(t, rdb, ns, jobs.Config{Namespace: ns, Retention: time.Hour})
	var asked int
	cfg := f.config()
	cfg.EffectPruner = func(context.Context) (int64, error) { asked++; return 3, nil }
	l := f.leader(cfg)
	leader := f.lead("pool-a")
	old := f.enqueue("work")
	if _, err := f.client.Cancel(f.ctx, jobs.DefaultQueue, old, "alice", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	pending := f.enqueue("work")
	cancelled := f.ledger.StateKey(jobs.DefaultQueue, jobs.Cancelled)

	// Within the retention: kept.
	if err := l.pruner.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.ZCard(f.ctx, cancelled).Val(); n != 1 {
		t.Fatalf("a job cancelled just now was pruned (%d left)", n)
	}
	// Past it (the pruner's clock moved on): its index entry goes.
	l.pruner.now = f.later(time.Hour + time.Minute)
	if err := l.pruner.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.ZCard(f.ctx, cancelled).Val(); n != 0 {
		t.Fatalf("the job cancelled past the retention is still indexed (%d)", n)
	}
	if st := f.get(pending).State; st != jobs.Pending || f.rdb.ZCard(f.ctx, f.ledger.StateKey(jobs.DefaultQueue, jobs.Pending)).Val() != 1 {
		t.Fatalf("the pending job was touched: %s", st)
	}
	if asked != 2 || !f.logged("pruned effect records past their retention", `"records":3`) {
		t.Fatalf("effect pruner asked %d times, want 2 (and logged)", asked)
	}
}

// TestPrunerEffectLogFailure: an effect log that fails to prune is logged
// and counted, and the queues are pruned all the same.
func TestPrunerEffectLogFailure(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.EffectPruner = func(context.Context) (int64, error) { return 0, errors.New("database is down") }
	l := f.leader(cfg)
	l.pruner.now = f.later(jobs.DefaultRetention + time.Minute)
	id := f.enqueue("work")
	if _, err := f.client.Cancel(f.ctx, jobs.DefaultQueue, id, "alice", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if err := l.pruner.runOnce(f.ctx, f.lead("pool-a")); err != nil {
		t.Fatalf("a failing effect log failed the pass: %v", err)
	}
	if n := f.rdb.ZCard(f.ctx, f.ledger.StateKey(jobs.DefaultQueue, jobs.Cancelled)).Val(); n != 0 {
		t.Fatalf("the queue was not pruned (%d entries left)", n)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServicePruner)); v != 1 {
		t.Fatalf("pruner errors %v, want 1", v)
	}
	if !f.logged("effect log pruning failed", "database is down", `"service":"pruner"`) {
		t.Fatal("the failure was not logged")
	}
}

// TestPrunerEndsLostLimitPermits: a pass ends the permit of a concurrency
// limit whose holder's record was lost (ledger.RepairLimits), so the job
// parked behind it is woken, and says so in the leader's log.
func TestPrunerEndsLostLimitPermits(t *testing.T) {
	rdb, ns := redistest.New(t)
	f := newFixtureOn(t, rdb, ns, jobs.Config{Namespace: ns})
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	lim := jobs.Limit("export:c1", 1)
	holder := f.enqueue("work", lim)
	parked := f.enqueue("work", lim)
	if id := f.claim(jobs.DefaultQueue, time.Minute); id != holder {
		t.Fatalf("claimed %s, want %s", id, holder)
	}
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey(jobs.DefaultQueue, holder)).Err(); err != nil {
		t.Fatal(err)
	}
	if w := f.get(parked).WaitingFor; w == "" {
		t.Fatal("the second job is not parked behind the first's permit")
	}
	if err := l.pruner.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if w := f.get(parked).WaitingFor; w != "" {
		t.Fatalf("the parked job still waits (%q) after the pass", w)
	}
	if id := f.claim(jobs.DefaultQueue, time.Minute); id != parked {
		t.Fatalf("claimed %s, want the woken %s", id, parked)
	}
	if !f.logged("ended concurrency-limit permits whose holder was lost", `"count":1`) {
		t.Fatalf("no warning of the ended permit in the log:\n%s", f.logs.String())
	}
}

// TestPrunerPassesOverForeignIndex: a queue whose succeeded index holds
// another type (written by hand) still has its other indexes pruned and
// its lost concurrency-limit permits ended; the foreign key is logged by
// name and counted. The pass stopped at that index, on every pass: the
// queue's jobs parked on a lost permit waited for ever.
func TestPrunerPassesOverForeignIndex(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	l.pruner.now = f.later(jobs.DefaultRetention + time.Minute)
	q := jobs.DefaultQueue
	held := f.enqueue("work", jobs.Limit("acct", 1))
	parked := f.enqueue("work", jobs.Limit("acct", 1))
	if got := f.claim(q, time.Minute); got != held {
		t.Fatalf("claimed %s, want %s", got, held)
	}
	f.rdb.Del(f.ctx, f.ledger.JobKey(q, held)) // its holder lost
	old := f.enqueue("other")
	if _, err := f.client.Cancel(f.ctx, q, old, "alice", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	succeeded := f.ledger.StateKey(q, jobs.Succeeded)
	f.rdb.Set(f.ctx, succeeded, "x", 0)
	if err := l.pruner.runOnce(f.ctx, f.lead("pool-a")); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.ZCard(f.ctx, f.ledger.StateKey(q, jobs.Cancelled)).Val(); n != 0 {
		t.Fatalf("the cancelled index was not pruned (%d entries left)", n)
	}
	if st := f.get(parked).State; st != jobs.Pending {
		t.Fatalf("the parked job is %s, want pending: its lost permit ended", st)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServicePruner)); v != 1 {
		t.Fatalf("pruner errors %v, want 1", v)
	}
	if !f.logged("maintenance pass failed on one queue", succeeded) {
		t.Fatal("the foreign index was not logged by name")
	}
}
