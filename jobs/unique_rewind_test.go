package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestUniqueJobAcrossARewind: a unique job lost with the ledger's record
// (a restart without persistence) comes back at most once for its key.
// Re-submitted first, it comes back holding its key, so a later enqueue of
// the key is deduplicated to it; enqueued again by another client first,
// the re-submission leaves the new holder alone instead of doubling it.
// A key whose recorded holder is gone (its record lost alone) is free.
func TestUniqueJobAcrossARewind(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	// Redis's clock in the middle of an hour: the test cannot cross a
	// period boundary unless it moves the clock.
	now := time.Now()
	mid := now.Truncate(time.Hour).Add(30 * time.Minute).Sub(now)
	srv.SetClockOffset(mid)
	ns := redistest.Namespace(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	other := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	byArgs := jobs.Unique(jobs.UniqueOpts{ByArgs: true})
	hourly := jobs.Unique(jobs.UniqueOpts{ByArgs: true, ByPeriod: time.Hour})
	first := enqueued(t, client, syncArgs{Customer: "resubmitted-first"}, byArgs)
	second := enqueued(t, client, syncArgs{Customer: "enqueued-again-first"}, byArgs)
	periodic := enqueued(t, client, syncArgs{Customer: "periodic"}, hourly)
	srv.Restart() // every job is lost

	again := enqueued(t, other, syncArgs{Customer: "enqueued-again-first"}, byArgs)
	if again.Deduplicated || again.JobID == second.JobID {
		t.Fatalf("enqueue of a lost unique job: %+v, want a new job", again)
	}
	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Restored != 2 {
		t.Fatalf("resubmitted %+v, want 2 restored (not the key enqueued again)", res)
	}
	insp := client.Inspector()
	if rec, err := insp.Get(ctx, second.Queue, second.JobID); err == nil {
		t.Fatalf("the re-submission doubled a key enqueued again since: %+v beside %s", rec, again.JobID)
	}
	for _, tc := range []struct {
		args jobs.JobArgs
		opt  jobs.Option
		want string
	}{
		{syncArgs{Customer: "resubmitted-first"}, byArgs, first.JobID},
		{syncArgs{Customer: "enqueued-again-first"}, byArgs, again.JobID},
		{syncArgs{Customer: "periodic"}, hourly, periodic.JobID},
	} {
		if r := enqueued(t, other, tc.args, tc.opt); !r.Deduplicated || r.JobID != tc.want {
			t.Errorf("enqueue of %+v after the re-submission: %+v, want deduplicated to %s", tc.args, r, tc.want)
		}
	}
	counts, err := insp.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if counts[jobs.Pending] != 3 {
		t.Fatalf("%d pending jobs, want 3: one per key", counts[jobs.Pending])
	}

	// A holder whose record alone was lost holds nothing.
	if err := rdb.Del(ctx, ns+":{"+first.Queue+"}:job:"+first.JobID).Err(); err != nil {
		t.Fatal(err)
	}
	if r := enqueued(t, other, syncArgs{Customer: "resubmitted-first"}, byArgs); r.Deduplicated {
		t.Fatalf("enqueue of a key whose holder is gone: %+v, want a new job", r)
	}
}
