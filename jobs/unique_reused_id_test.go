package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestUniqueKeyOfReusedJobID: a job named by its operation id holds unique
// key A, succeeds and expires after retention; the operation id is used
// again for a job of other args (unique key B), so the same job id now
// holds B. The unique index's entry for A still names that id: it must not
// make the next job of A a duplicate of the job of B, and pruning releases
// it.
func TestUniqueKeyOfReusedJobID(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	cfg := jobs.Config{Namespace: ns, Retention: time.Second}
	c := jobs.NewClient(rdb, cfg)
	env := fencedqtest.New(rdb, cfg)
	uniq := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	op := jobs.OperationID("sync-nightly")

	first := enqueued(t, c, syncArgs{Customer: "a"}, uniq, op)
	if r := fencedqtest.WorkJob(ctx, t, env, okWorker{}, first.Queue, first.JobID); r.Record.State != jobs.Succeeded {
		t.Fatalf("worked job is %s", r.Record.State)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Inspector().Get(ctx, first.Queue, first.JobID)
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not expired 30s after its 1s retention", first.JobID)
		}
		time.Sleep(50 * time.Millisecond) // polling for the expiry, not an assertion
	}

	second := enqueued(t, c, syncArgs{Customer: "b"}, uniq, op)
	if second.Deduplicated || second.JobID != first.JobID {
		t.Fatalf("the operation id used again after expiry: %+v, want a new job named %s", second, first.JobID)
	}
	removed, err := jobs.PruneUniqueForTest(ctx, c, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 {
		t.Errorf("pruned %d unique keys, want 1: customer a's, whose job id now holds customer b's", removed)
	}
	third := enqueued(t, c, syncArgs{Customer: "a"}, uniq)
	if third.Deduplicated {
		t.Fatalf("customer a's job deduplicated to %s, the job of customer b", third.JobID)
	}
	if again := enqueued(t, c, syncArgs{Customer: "b"}, uniq); !again.Deduplicated || again.JobID != second.JobID {
		t.Fatalf("customer b's key not held by its job: %+v", again)
	}
}
