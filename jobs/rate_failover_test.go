package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// A failover inside a rate limit's period loses the starts the promoted
// node did not have: their jobs are pending again and start anew, counted
// then, so in that period the key starts at most its max plus the starts
// the failover lost, never more, even on a node whose clock is behind (the
// period is of the namespace's time, which goes on).
func TestRateAcrossAFailoverExceedsByTheLostStartsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Replica.SetClockOffset(-10 * time.Minute)
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions()}
	rdb := f.Client()
	client := jobs.NewClient(rdb, cfg)
	const max, jobsN = 4, 12
	for i := range jobsN {
		if _, err := client.Enqueue(ctx, countArgs{N: i}, jobs.Rate("provider:api", max, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// l claims as a pool does; claimAll claims until the rate defers the
	// rest, riding out the failover client's first errors.
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: cfg.Sentinel})
	claimAll := func(owner string, most int) int {
		t.Helper()
		n := 0
		deadline := time.Now().Add(testsignal.Timeout())
		for {
			res, err := l.Claim(ctx, jobs.DefaultQueue, owner, time.Minute, most)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("claim by %s: %v", owner, err)
				}
				time.Sleep(20 * time.Millisecond) // a redial's pace, not a wait for an outcome
				continue
			}
			n += len(res.Jobs)
			if len(res.Jobs) == 0 || n >= most {
				return n
			}
		}
	}
	kept := claimAll("kept", 1)
	f.Sync()
	f.CutReplication()
	lost := claimAll("lost", jobsN)
	if kept != 1 || lost != max-kept {
		t.Fatalf("before the failover: %d kept and %d lost starts, want 1 and %d", kept, lost, max-kept)
	}
	f.KillPrimary()

	after := claimAll("after", jobsN)
	if after != max-kept {
		t.Fatalf("%d starts after the failover, want %d: the max less the starts the promoted node kept", after, max-kept)
	}
	if total := kept + lost + after; total > max+lost {
		t.Fatalf("%d starts in the period, above the max %d plus the %d lost starts", total, max, lost)
	}
	fs, err := client.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Rates) != 1 || fs.Rates[0].Starts != max {
		t.Fatalf("the rate after the failover: %+v, want %d starts counted", fs.Rates, max)
	}
}
