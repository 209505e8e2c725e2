package bank_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestPausedWorkerIsFencedAcrossProcesses is ARCHITECTURE.md's opening timeline with real
// processes, for each protected store:
//
//  1. worker process A claims a transfer and leases its source account
//     (fence a), fences on acquire and, just before writing, is stopped
//     with SIGSTOP;
//  2. its 1s lease lapses; worker process B, the maintenance leader, moves
//     the job to uncertain, asks bank.Worker.Reconcile (not applied) and
//     re-runs it: B claims, leases the account with fence b > a, fences on
//     acquire, writes and commits;
//  3. A is resumed with SIGCONT and writes, ignoring its cancelled context:
//     the store rejects it (fence.ErrStale, high-water b), and the ledger
//     rejects A's commit (fenced_commit).
//
// The final state is B's: one transfer, the effect log names b, the job
// succeeded on B's attempt with fence b.
func TestPausedWorkerIsFencedAcrossProcesses(t *testing.T) {
	for _, kind := range []string{"postgres", "redis", "http"} {
		t.Run(kind, func(t *testing.T) { testPausedWorker(t, kind) })
	}
}

func testPausedWorker(t *testing.T, kind string) {
	e := newBankEnv(t, kind)
	ctx := context.Background()
	before := e.balances()
	x := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 250, Memo: "rent"}
	op := "xfer-paused-" + kind

	// A alone: it gets the job. Its maintenance is off, so B leads later.
	a := startProc(t, e.helper("A", modePauseBeforeWrite, false))
	res := e.enqueue(x, op)
	e.watchSucceeded(res.JobID, op)
	aStart := e.waitEvent("A started", is("A", "started"))
	a.pause()
	t0 := time.Now()
	// A may write as soon as it runs again; it cannot see this while stopped.
	if err := e.rdb.RPush(ctx, goKey(e.ns), "1").Err(); err != nil {
		t.Fatal(err)
	}

	startProc(t, e.helper("B", modeNormal, true))
	rec := jobstest.WaitStateWithin(t, e.ledger, queue, res.JobID, jobs.Succeeded, helperBound) // B starts first
	b := fenceOf(rec)
	t.Logf("A stopped; B re-ran and committed %v later (fence a=%d, b=%d)", time.Since(t0).Round(time.Millisecond), aStart.Token, b)
	bWrite := e.waitEvent("B write", is("B", "write"))
	switch {
	case bWrite.Result != "applied":
		t.Fatalf("B's write: %+v", bWrite)
	case b != lease.Token(bWrite.Token) || b <= lease.Token(aStart.Token):
		t.Fatalf("job's fence %d, B wrote with %d, A held %d: want B's fence above A's", b, bWrite.Token, aStart.Token)
	case rec.Attempts != 2 || rec.Owner != "B" || bWrite.Owner != fenceOwner(rec):
		t.Fatalf("job after B: attempts %d, owner %q (B wrote as %q)", rec.Attempts, rec.Owner, bWrite.Owner)
	}
	if n := len(e.events(is("A", "write"))); n != 0 {
		t.Fatalf("A wrote while stopped (%d writes)", n)
	}

	// A wakes up and tries to write, then to commit.
	a.resume()
	aWrite := e.waitEvent("A write", is("A", "write"))
	if aWrite.Result != "stale" || lease.Token(aWrite.Token) != lease.Token(aStart.Token) {
		t.Fatalf("A's write after resuming: %+v, want stale", aWrite)
	}
	if lease.Token(aWrite.Stored) != b {
		t.Fatalf("A was rejected by high-water %d, want B's fence %d", aWrite.Stored, b)
	}
	if err := redistest.Wait(e.rdb, e.ns, helperBound, func() bool { return e.stats()["fenced_commit"] == 1 }); err != nil {
		t.Fatalf("A's commit was not rejected by the ledger: %v; stats %v", err, e.stats())
	}

	// The final state is B's.
	final := e.get(res.JobID)
	if final.State != jobs.Succeeded || final.Token != rec.Token || final.Fence != rec.Fence || final.Attempts != 2 {
		t.Fatalf("A changed the job: %+v", final)
	}
	applied, ok, err := e.store.Applied(ctx, op)
	owner := fenceOwner(rec)
	if kind == "http" {
		owner = "" // the service's effects view names no owner
	}
	if err != nil || !ok || applied.Token != b || applied.Owner != owner {
		t.Fatalf("effect log: %+v, %v, %v; want fence %d of %q", applied, ok, err, b, owner)
	}
	e.wantOneTransfer(before, x)
	// A's attempt is the one A's pool claimed; its commit carries that
	// attempt's job token.
	var fenced, rerun bool
	aTokens := map[string]bool{}
	for _, en := range e.history(res.JobID) {
		if en.Event == "attempt" && en.Owner == "A" {
			aTokens[en.Token] = true
		}
		if en.Event == "fenced" && en.Stage == "commit" && aTokens[en.Token] {
			fenced = true
		}
		if en.Event == "resolve" && en.Decision == string(jobs.DecideRerun) && en.Actor == "reconciler:B" {
			rerun = true
		}
	}
	if !fenced || !rerun {
		t.Fatalf("history lacks A's fenced commit (%v) or B's re-run decision (%v):%s", fenced, rerun, jobstest.History(e.history(res.JobID)))
	}
}
