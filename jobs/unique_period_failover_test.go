package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// A ByPeriod key's period is of the namespace's time, which a failover
// continues: promoted to a node whose clock is 10 minutes behind, in the
// previous hour by its own TIME, an hourly unique job enqueued again is
// still a duplicate of the one the old primary took in this hour.
func TestUniquePeriodGoesOnAcrossAFailoverToASlowClock(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	// The primary 5 minutes into an hour, the replica 10 minutes behind it:
	// in the previous hour.
	now := time.Now()
	into := now.Truncate(time.Hour).Add(5 * time.Minute).Sub(now)
	f.Primary.SetClockOffset(into)
	f.Replica.SetClockOffset(into - 10*time.Minute)
	ns := redistest.Namespace(t)
	client := jobs.NewClient(f.Client(), jobs.Config{Namespace: ns, Sentinel: f.ClientOptions()})
	hourly := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByPeriod: time.Hour})
	first := enqueued(t, client, syncArgs{Customer: "acme"}, hourly)
	f.Sync()
	f.KillPrimary()

	promoted, err := f.Replica.Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !promoted.Truncate(time.Hour).Before(now.Add(into).Truncate(time.Hour)) {
		t.Fatalf("the promoted node's clock (%v) is not in the hour before the old primary's: the test shows nothing", promoted)
	}
	var again *jobs.Result
	deadline := time.Now().Add(testsignal.Timeout())
	for again == nil {
		// The failover client's first calls may still meet the killed primary.
		again, err = client.Enqueue(ctx, syncArgs{Customer: "acme"}, hourly)
		if err != nil && time.Now().After(deadline) {
			t.Fatalf("enqueue after the failover: %v", err)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond) // a redial's pace, not a wait for an outcome
		}
	}
	if !again.Deduplicated || again.JobID != first.JobID {
		t.Fatalf("the hourly job enqueued again after the failover: %+v, want deduplicated to %s", again, first.JobID)
	}
}
