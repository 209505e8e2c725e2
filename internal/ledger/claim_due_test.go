package ledger_test

import (
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestClaimSaysWhenTheNextJobIsDue: a claim that leaves due jobs says one
// is due now (0); a claim that takes the last due ones, even all it asked
// for, says when the next pending job is due, or -1 when none is left; so
// a pool never sends a claim to a queue it just drained.
func TestClaimSaysWhenTheNextJobIsDue(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	for range 4 {
		f.enqueue()
	}
	claim := func(n int) (got int, dueIn time.Duration) {
		t.Helper()
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, n)
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Jobs), res.DueIn
	}
	if got, due := claim(2); got != 2 || due != 0 {
		t.Fatalf("first claim: %d jobs, due in %v; want 2 and 0 (two more are due)", got, due)
	}
	if got, due := claim(2); got != 2 || due != -1 {
		t.Fatalf("claim of the last two: %d jobs, due in %v; want 2 and -1 (nothing left)", got, due)
	}
	f.enqueue()
	f.enqueue(jobs.Delay(time.Hour))
	got, due := claim(1)
	if got != 1 || due < 59*time.Minute || due > time.Hour {
		t.Fatalf("claim of the last due job: %d jobs, due in %v; want 1 and about an hour", got, due)
	}
}
