package jobs_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestUniqueRerunHoldsItsKey: an operator's re-run of a cancelled unique
// job, whose key no other job took meanwhile, holds the key again whether
// or not the pruner dropped the released entry while it was cancelled: a
// later enqueue of the key is a duplicate of the re-run job, never a
// second pending job of one key.
func TestUniqueRerunHoldsItsKey(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	opt := jobs.Unique(jobs.UniqueOpts{ByArgs: true})
	for _, prune := range []bool{false, true} {
		args := syncArgs{Customer: "c1", Scope: map[bool]string{false: "kept", true: "pruned"}[prune]}
		first := enqueued(t, c, args, opt)
		if _, err := c.Cancel(ctx, first.Queue, first.JobID, "alice", "test"); err != nil {
			t.Fatal(err)
		}
		if prune {
			if n, err := jobs.PruneUniqueForTest(ctx, c, jobs.DefaultQueue); err != nil || n != 1 {
				t.Fatalf("pruned %d (%v), want the cancelled job's entry", n, err)
			}
		}
		if _, err := c.Resolve(ctx, first.Queue, first.JobID, jobs.DecideRerun, "alice", "again"); err != nil {
			t.Fatal(err)
		}
		if again := enqueued(t, c, args, opt); !again.Deduplicated || again.JobID != first.JobID {
			t.Fatalf("pruned %v: enqueue after the re-run: %+v, want deduplicated to the pending job %s", prune, again, first.JobID)
		}
	}
}
