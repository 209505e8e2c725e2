package worker_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type stepsArgs struct{}

func (stepsArgs) Kind() string { return "steps" }

// TestProgressOnAPartitionedQueue: a job of a partitioned queue (its queue
// a partition's name) reports progress as any job does.
func TestProgressOnAPartitionedQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "default", 3, "test", "progress"); err != nil {
		t.Fatal(err)
	}
	p := e.pool(e.config())
	if err := worker.Register(p, jobs.WorkFunc[stepsArgs](func(ctx context.Context, _ *jobs.Job[stepsArgs]) error {
		return jobs.Progress(ctx, 1, 2, "half")
	})); err != nil {
		t.Fatal(err)
	}
	res := e.enqueue(stepsArgs{})
	e.start(p)
	rec := jobstest.WaitState(t, e.ledger, res.Partition, res.JobID, jobs.Succeeded)
	if rec.Progress == nil || rec.Progress.Done != 1 {
		t.Fatalf("progress %+v, want 1 of 2", rec.Progress)
	}
}
