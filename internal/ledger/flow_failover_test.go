package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A rate's window is counted on the namespace's time, so its starts must
// live as long on that time whichever node holds them. Here a node whose
// clock is 10 minutes behind is primary (the namespace's time runs on an
// offset there, internal/epoch) while jobs start under a rate of 3 per
// minute; then the deployment fails back to a node with the right clock,
// which resumes the namespace's time from the last time written. Its first
// claim must still count the 3 starts. (They used to expire by a TTL on the
// slow node's clock, 10 minutes early on the next one: every failover from
// such a node opened a new window at once, and the chaos suite's "rate
// never exceeded" failed.)
func TestRateWindowSurvivesAFailoverFromASlowClock(t *testing.T) {
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute)
	ctx := context.Background()
	ns := redistest.Namespace(t)
	const q = "q"
	insert := func(l *ledger.Ledger, from, n int) {
		t.Helper()
		js := make([]*ledger.NewJob, n)
		for i := range js {
			js[i] = &ledger.NewJob{ID: fmt.Sprintf("r-%d", from+i), Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
				Flow: &ledger.Flow{RateKey: "api", RateMax: 3, RatePer: time.Minute}}
		}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(l *ledger.Ledger) *ledger.ClaimResult {
		t.Helper()
		r, err := l.Claim(ctx, q, "p", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := ledger.New(f.Primary.Client(), ledger.Config{Namespace: ns})
	if _, err := first.ServerTime(ctx); err != nil { // the namespace's time begins on the right clock
		t.Fatal(err)
	}
	f.KillPrimary() // the slow node is primary

	slow := ledger.New(f.Replica.Client(), ledger.Config{Namespace: ns})
	insert(slow, 0, 3)
	if r := claim(slow); len(r.Jobs) != 3 {
		t.Fatalf("claim on the slow node: %d jobs, want 3", len(r.Jobs))
	}
	f.FailBackReady()
	f.KillPrimary() // the node with the right clock is primary again

	l := ledger.New(f.Replica.Client(), ledger.Config{Namespace: ns})
	insert(l, 3, 3)
	r := claim(l)
	if len(r.Jobs) != 0 {
		t.Fatalf("the new primary started %d more jobs in the window of 3 starts per minute that already holds 3", len(r.Jobs))
	}
	if len(r.Dropped) != 3 {
		t.Fatalf("held back %+v, want the 3 new jobs", r.Dropped)
	}
	for _, d := range r.Dropped {
		if d.State != "rate:" { // "api" has no name: no ':' in it
			t.Fatalf("job %s held back for %q, want rate: (unnamed)", d.ID, d.State)
		}
	}
}
