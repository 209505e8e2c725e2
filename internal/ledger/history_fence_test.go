package ledger_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestResourceFencedSuccessKeepsNoHistory: a job whose one attempt leased
// a named resource and succeeded took the common path (enqueued, one
// attempt, succeeded), so it writes no history list, as a job fenced by
// its own token does; its record keeps the resource lease's token, and the
// timeline shows it at the attempt's end, as a history list does.
func TestResourceFencedSuccessKeepsNoHistory(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	id := f.enqueue()
	c := f.claimOne(id)
	fence := c.Token + 7 // the resource lease's token
	out, err := f.l.Complete(f.ctx, f.q, []ledger.Completion{{ID: c.ID, Token: c.Token, Fence: fence, Outcome: ledger.Outcome{To: jobs.Succeeded}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("commit: %+v, %v", out, err)
	}
	rec := f.want(id, jobs.Succeeded)
	if rec.Fence != fence {
		t.Errorf("record's fence %d, want %d", rec.Fence, fence)
	}
	if n, _ := rdb.Exists(f.ctx, f.l.JobKey(f.q, id)+":history").Result(); n != 0 {
		t.Error("history list written for a resource-fenced success on the common path")
	}
	h, err := f.l.History(f.ctx, f.q, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[1].Event != "attempt" || h[2].Fence != fence.String() || h[2].Outcome != string(jobs.Succeeded) {
		t.Errorf("timeline %+v, want enqueued, attempt, end succeeded with fence %d", h, fence)
	}
}
