package bank_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// TestPausedMaintenanceLeaderIsReplaced runs two pools, the maintenance
// leader L as a process and P in this process (issue 5). L is stopped with
// SIGSTOP:
//
//   - P takes over leadership (the status hash's leader becomes P, with a
//     higher leader token);
//   - P resolves a job that became uncertain meanwhile (re-run, then
//     succeeded), which records P's token as the queue's leader
//     high-water in the ledger;
//   - L is resumed with SIGCONT: it logs that it lost leadership, makes no
//     decision on any job, P stays the leader, and a ledger write carrying
//     L's old leader token is refused with jobs.ErrStale.
func TestPausedMaintenanceLeaderIsReplaced(t *testing.T) {
	e := newBankEnv(t, "redis")
	ctx := context.Background()
	l := startProc(t, e.helper("L", modeNormal, true))
	e.waitLeader("L", helperBound)
	lTok, err := lease.ParseToken(e.status()["token"])
	if err != nil {
		t.Fatal(err)
	}

	logs := &syncbuf.Buffer{}
	cfg := e.poolConfig("P", logs)
	cfg.Maintenance.Interval = 200 * time.Millisecond
	probe := e.probe("P", modeNormal)
	probe.failFirst = true // P's first transfer ends uncertain
	p, err := worker.NewPool(e.rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.Worker[bank.Transfer](newTransferWorker(probe))); err != nil {
		t.Fatal(err)
	}
	e.run(p, logs)
	// P runs, but L still leads. Half a second is two and a half of P's
	// maintenance intervals (200 ms): each interval P's elector tries for the
	// leader lease, so a P that could take it from a live L would have.
	time.Sleep(500 * time.Millisecond)
	if got := e.status()["leader"]; got != "L" {
		t.Fatalf("leader changed to %q while L was running", got)
	}

	l.pause()
	paused := time.Now()
	e.waitLeader("P", 30*time.Second) // L's leader lease lapses first
	pTok, _ := lease.ParseToken(e.status()["token"])
	t.Logf("L (token %d) stopped; P leads with token %d after %v", lTok, pTok, time.Since(paused).Round(time.Millisecond))
	if pTok <= lTok {
		t.Fatalf("new leader token %d not above the old %d", pTok, lTok)
	}

	// A job goes uncertain while L is stopped; the new leader resolves it.
	before := e.balances()
	x := bank.Transfer{From: "acct-000", To: "acct-002", Cents: 99}
	res := e.enqueue(x, "xfer-leader")
	rec := jobstest.WaitState(t, e.ledger, queue, res.JobID, jobs.Succeeded)
	e.wantOneTransfer(before, x)
	var byP bool
	for _, en := range e.history(res.JobID) {
		if en.Event == "resolve" && en.Decision == string(jobs.DecideRerun) && en.Actor == "reconciler:P" {
			byP = true
		}
	}
	if !byP || rec.Attempts != 2 {
		t.Fatalf("the uncertain job was not re-run by P (attempts %d):%s", rec.Attempts, jobstest.History(e.history(res.JobID)))
	}
	hw, _ := lease.ParseToken(e.rdb.Get(ctx, e.ns+":{"+queue+"}:reconciler").Val())
	if hw < pTok {
		t.Fatalf("queue's leader high-water %d, want at least P's token %d", hw, pTok)
	}

	// L wakes up.
	l.resume()
	resumed := time.Now()
	l.waitOutput("maintenance leadership lost")
	t.Logf("L resumed; noticed the loss within %v", time.Since(resumed).Round(time.Millisecond))
	// Give a stale L every chance to act: a second is five of L's
	// maintenance intervals (200 ms), so any pass L still ran on its old
	// leadership would have written (and been refused) by then.
	time.Sleep(time.Second)
	e.waitLeader("P", 10*time.Second)
	for _, en := range e.history(res.JobID) {
		if en.Actor == "reconciler:L" {
			t.Fatalf("L decided on the job: %+v", en)
		}
	}
	if st := e.stats(); st["resolved_rerun"] != 1 {
		t.Fatalf("decisions after L resumed: %v", st)
	}
	// Any ledger write L could still attempt with its old token is refused.
	if _, err := e.ledger.Expire(ctx, queue, lTok, 10); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("a leader write with L's old token %d: %v, want jobs.ErrStale", lTok, err)
	}
	if strings.Contains(l.out.String(), "stale") {
		t.Logf("L's log mentions a stale write:\n%s", grep(l.out.String(), "stale"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
