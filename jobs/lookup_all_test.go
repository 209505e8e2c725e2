package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLookupsOverAllQueues: AllPaused, QueuesHolding and
// FindByOperationAll read every queue, a partitioned one's partitions
// included, and a registry member no call could take (written by hand) is
// left out; an operation id ValidateOperationID refuses is ErrInvalid,
// before any read.
func TestLookupsOverAllQueues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, "parts", 3, "alice", ""); err != nil {
		t.Fatal(err)
	}
	a, err := c.Enqueue(ctx, benchArgs{}, jobs.Queue("parts"), jobs.OperationID("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Enqueue(ctx, benchArgs{}, jobs.Queue("plain"), jobs.OperationID("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, "parts", "alice", "hold"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, ns+":queues", "..").Err(); err != nil {
		t.Fatal(err)
	}
	in := c.Inspector()

	ps, err := in.AllPaused(ctx)
	if err != nil || len(ps) != 2 || ps[0].Queue != "parts" || ps[0].Paused == nil || ps[0].Paused.Note != "hold" || ps[1].Queue != "plain" || ps[1].Paused != nil {
		t.Fatalf("AllPaused: %+v %v", ps, err)
	}
	for _, want := range []*jobs.Result{a, b} {
		if qs, err := in.QueuesHolding(ctx, want.JobID); err != nil || len(qs) != 1 || qs[0] != want.Queue {
			t.Fatalf("QueuesHolding(%s): %v %v, want [%s]", want.JobID, qs, err, want.Queue)
		}
	}
	if qs, err := in.QueuesHolding(ctx, "nope"); err != nil || len(qs) != 0 {
		t.Fatalf("QueuesHolding(nope): %v %v", qs, err)
	}
	recs, err := in.FindByOperationAll(ctx, "op-1")
	if err != nil || len(recs) != 2 || recs[0].ID != a.JobID || recs[1].ID != b.JobID {
		t.Fatalf("FindByOperationAll(op-1): %+v %v", recs, err)
	}
	if recs, err := in.FindByOperationAll(ctx, "nope"); err != nil || len(recs) != 0 {
		t.Fatalf("FindByOperationAll(nope): %+v %v", recs, err)
	}
	if _, err := in.FindByOperationAll(ctx, ""); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("FindByOperationAll(\"\"): %v, want ErrInvalid", err)
	}
}
