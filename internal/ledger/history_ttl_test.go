package ledger_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLateEntryOnAFinishedJobExpiresWithIt: a job that succeeded on the
// common path has no history; an entry written about it afterwards (here
// the completer's retry of a completion whose first call applied but whose
// reply was lost: the ledger records it as a refused commit) starts its
// history. That history must expire with the job, as every finished job's
// does, not outlive it for ever.
func TestLateEntryOnAFinishedJobExpiresWithIt(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	id := f.enqueue()
	c := f.claimOne(id)
	done := []ledger.Completion{{ID: id, Token: c.Token, Outcome: ledger.Outcome{To: jobs.Succeeded}}}
	for i := range 2 { // the call, then its retry
		if _, err := f.l.Complete(f.ctx, f.q, done); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	job := f.l.JobKey(f.q, id)
	jobTTL := f.rdb.PTTL(f.ctx, job).Val()
	histTTL := f.rdb.PTTL(f.ctx, job+":history").Val()
	if h, err := f.l.History(f.ctx, f.q, id); err != nil || len(h) == 0 {
		t.Fatalf("history %v, %v: want the refused commit recorded", h, err)
	}
	if jobTTL <= 0 || histTTL <= 0 {
		t.Fatalf("the job expires in %v, its history in %v: the history outlives the job's retention", jobTTL, histTTL)
	}
}
