package bank_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// TestKilledWorkerIsReconciled kills a worker process with SIGKILL in the
// middle of a transfer and lets a second pool recover the job (issue 5):
//
//   - AfterEffect: killed after its pgfence transaction committed, before
//     the ledger commit. The job is reconciled to succeeded from the effect
//     log (attempt 1, the dead worker's; the effect carries its fence) and
//     not applied again.
//   - BeforeEffect: killed after fencing on acquire, before writing. The
//     job is re-run once with a higher fence; exactly one effect.
//
// Each runs with the resolver asking bank.Worker.Reconcile, and with a
// worker that has no Reconcile method, so the pool's
// Config.Maintenance.EffectLog (the PostgreSQL store) answers.
func TestKilledWorkerIsReconciled(t *testing.T) {
	for _, afterEffect := range []bool{true, false} {
		for _, via := range []string{"Reconcile", "EffectLog"} {
			name := "BeforeEffect/" + via
			if afterEffect {
				name = "AfterEffect/" + via
			}
			t.Run(name, func(t *testing.T) { testKilled(t, afterEffect, via) })
		}
	}
}

func testKilled(t *testing.T, afterEffect bool, via string) {
	e := newBankEnv(t, "postgres")
	ctx := t.Context()
	before := e.balances()
	mode := modeBlockBeforeEffect
	if afterEffect {
		mode = modeBlockAfterEffect
	}
	a := startProc(t, e.helper("A", mode, false))
	x := bank.Transfer{From: "acct-001", To: "acct-002", Cents: 300}
	op := "xfer-killed-" + strings.ReplaceAll(t.Name(), "/", "-")
	res := e.enqueue(x, op)
	e.watchSucceeded(res.JobID, op)
	var aTok lease.Token
	if afterEffect {
		w := e.waitEvent("A write", is("A", "write"))
		if w.Result != "applied" {
			t.Fatalf("A's write: %+v", w)
		}
		aTok = lease.Token(w.Token)
	} else {
		aTok = lease.Token(e.waitEvent("A started", is("A", "started")).Token)
	}
	a.kill()
	killed := time.Now()
	if _, ok, err := e.store.Applied(ctx, op); err != nil || ok != afterEffect {
		t.Fatalf("after the kill: applied=%v (%v), want %v", ok, err, afterEffect)
	}
	if s := e.get(res.JobID).State; s != jobs.Running {
		t.Fatalf("the killed worker's job is %s, want running", s)
	}

	logs := &syncbuf.Buffer{}
	cfg := e.poolConfig("P", logs)
	w := newTransferWorker(e.probe("P", modeNormal))
	var reg jobs.Worker[bank.Transfer] = w
	if via == "EffectLog" {
		cfg.Maintenance.EffectLog = e.pg
		reg = effectLogOnly{w}
		// A's worker has a Reconcile, so while A's heartbeat lives a
		// leader without one leaves the job to a pool that has it; the
		// killed A's heartbeat would lapse in 15 s: let it go now.
		if err := e.ledger.Leave(ctx, "A"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := worker.NewPool(e.rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, reg); err != nil {
		t.Fatal(err)
	}
	e.run(p, logs)
	rec := jobstest.WaitState(t, e.ledger, queue, res.JobID, jobs.Succeeded)
	t.Logf("recovered %v after SIGKILL (A's fence %d, final fence %d, attempts %d)", time.Since(killed).Round(time.Millisecond), aTok, fenceOf(rec), rec.Attempts)

	e.wantOneTransfer(before, x)
	eff, ok, err := e.store.Applied(ctx, op)
	// After the effect, the only write is A's (the fence it wrote with);
	// before it, the re-run's (the fence its commit recorded).
	wantTok, wantOwner := fenceOf(rec), fenceOwner(rec)
	if afterEffect {
		wantTok, wantOwner = aTok, "A/"+rec.ID
	}
	if err != nil || !ok || eff.Token != wantTok || eff.Owner != wantOwner {
		t.Fatalf("effect log %+v, %v, %v; want token %d of %s", eff, ok, err, wantTok, wantOwner)
	}
	pWrites := e.events(is("P", "write"))
	wantDecision, wantNote := jobs.DecideRerun, "not_applied"
	if via == "EffectLog" {
		wantNote = "effect log: operation not applied"
	}
	if afterEffect {
		wantDecision, wantNote = jobs.DecideSucceeded, "Reconcile answered applied"
		if via == "EffectLog" {
			wantNote = "effect log: operation applied with token " + aTok.String()
		}
		if rec.Attempts != 1 || rec.Owner != "A" || rec.Token > aTok || len(pWrites) != 0 {
			t.Fatalf("re-applied: attempts %d by %s, token %d (A wrote with %d), P's writes %+v", rec.Attempts, rec.Owner, rec.Token, aTok, pWrites)
		}
	} else if rec.Attempts != 2 || rec.Owner != "P" || fenceOf(rec) <= aTok || len(pWrites) != 1 || pWrites[0].Result != "applied" {
		t.Fatalf("re-run: attempts %d by %s, fence %d (A's %d), P's writes %+v", rec.Attempts, rec.Owner, fenceOf(rec), aTok, pWrites)
	}
	var decided bool
	for _, en := range e.history(res.JobID) {
		if en.Event == "resolve" && en.Decision == string(wantDecision) && en.Actor == "reconciler:P" && strings.Contains(en.Note, wantNote) {
			decided = true
		}
	}
	if !decided {
		t.Fatalf("no %s decision noting %q by reconciler:P in the history:%s", wantDecision, wantNote, jobstest.History(e.history(res.JobID)))
	}
}

// TestCrashRecoveryWithinLeaseTTLPlusInterval states the design's promise
// (ARCHITECTURE.md, "The maintenance leader"): with lease TTL 2s and a leader scanning every
// 1s, a job whose worker process was SIGKILLed mid-call is resolved within
// TTL + interval + a few seconds of slack, not asynq's one-minute
// recoverer. The bound (15s) is generous; it is a promise, not a benchmark.
func TestCrashRecoveryWithinLeaseTTLPlusInterval(t *testing.T) {
	const ttl, interval, slack = 2 * time.Second, time.Second, 12 * time.Second
	e := newBankEnv(t, "redis")
	before := e.balances()
	c := e.helper("A", modeBlockBeforeEffect, false)
	c.LeaseTTL = ttl
	a := startProc(t, c)
	x := bank.Transfer{From: "acct-003", To: "acct-000", Cents: 40}
	res := e.enqueue(x, "xfer-crash-bound")
	aTok := lease.Token(e.waitEvent("A started", is("A", "started")).Token)

	// The surviving pool is up and leading before the crash, so the clock
	// measures recovery, not start-up.
	logs := &syncbuf.Buffer{}
	cfg := e.poolConfig("P", logs)
	cfg.LeaseTTL, cfg.Maintenance.Interval = ttl, interval
	p, err := worker.NewPool(e.rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.Worker[bank.Transfer](newTransferWorker(e.probe("P", modeNormal)))); err != nil {
		t.Fatal(err)
	}
	e.run(p, logs)
	e.waitLeader("P", 30*time.Second) // A's maintenance is off: P leads once its elector runs
	if s := e.get(res.JobID).State; s != jobs.Running {
		t.Fatalf("job is %s before the crash, want running", s)
	}

	a.kill()
	killed := time.Now()
	// Woken by every change of the job's keys: the first look after the
	// change that ends the running attempt times its detection.
	var detected time.Duration
	redistest.AwaitWithin(t, e.rdb, e.ledger.JobKey(queue, res.JobID), "the killed attempt's lease expiry", ttl+interval+slack, func() bool {
		if detected == 0 && e.get(res.JobID).State != jobs.Running {
			detected = time.Since(killed)
		}
		return detected > 0
	})
	rec := jobstest.WaitStateWithin(t, e.ledger, queue, res.JobID, jobs.Succeeded, ttl+interval+slack)
	recovered := time.Since(killed)
	t.Logf("SIGKILL -> lease expiry detected in %v, job succeeded (re-run, fence %d > %d) in %v; bound %v",
		detected.Round(time.Millisecond), fenceOf(rec), aTok, recovered.Round(time.Millisecond), ttl+interval+slack)
	if recovered > ttl+interval+slack {
		t.Fatalf("recovery took %v, want within %v", recovered, ttl+interval+slack)
	}
	if rec.Attempts != 2 || fenceOf(rec) <= aTok {
		t.Fatalf("re-run: attempts %d, fence %d (A's %d)", rec.Attempts, fenceOf(rec), aTok)
	}
	e.wantOneTransfer(before, x)
}
