package ledger_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestClaimClearsThePreviousAttemptsFence: Record.Fence is the fence of the
// attempt that last committed; once a new attempt is claimed it is unknown
// until that attempt commits, so the record must not show (nor the
// reconciler hand to Reconcile) an earlier attempt's resource-lease token.
func TestClaimClearsThePreviousAttemptsFence(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	id := f.enqueue()
	c1 := f.claimOne(id)
	f1 := c1.Token + 5
	out, err := f.l.Complete(f.ctx, f.q, []ledger.Completion{{ID: id, Token: c1.Token, Fence: f1,
		Outcome: ledger.Outcome{To: jobs.Uncertain, Reason: "timeout"}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("complete: %+v, %v", out, err)
	}
	if rec := f.want(id, jobs.Uncertain); rec.Fence != f1 {
		t.Fatalf("after the commit: fence %d, want %d", rec.Fence, f1)
	}
	if _, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideRerun, Actor: "operator:test"}); err != nil {
		t.Fatal(err)
	}
	c2 := f.claimOne(id)
	if rec := f.want(id, jobs.Running); rec.Token != c2.Token || rec.Fence != 0 {
		t.Fatalf("second attempt running: token %d (claimed %d), fence %d, want no fence yet", rec.Token, c2.Token, rec.Fence)
	}
	if _, err := f.l.Complete(f.ctx, f.q, []ledger.Completion{{ID: id, Token: c2.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	if rec := f.want(id, jobs.Succeeded); rec.Fence != 0 {
		t.Fatalf("second attempt (its own resource) succeeded: fence %d, want none", rec.Fence)
	}
}
