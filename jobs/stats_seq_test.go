package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestStatsOfAPartitionedQueueLeaveOutTheWriteSequence: a partitioned
// queue's Stats and Overview sum its partitions' counters, but each
// partition has its own write sequence ("seq"), whose sum is no sequence
// of anything: they leave it out, while each partition's own Stats and
// Overview's PartitionStats keep it, as does a queue of one name.
func TestStatsOfAPartitionedQueueLeaveOutTheWriteSequence(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := c.Enqueue(ctx, partArgs{Account: fmt.Sprint("acct-", i)}, jobs.Queue("orders")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}, jobs.Queue("plain")); err != nil {
		t.Fatal(err)
	}
	st, err := insp.Stats(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if seq, ok := st["seq"]; ok {
		t.Errorf("Stats of a partitioned queue has seq %d, a sum of its partitions' sequences", seq)
	}
	if st["enqueued"] != 12 {
		t.Errorf("Stats of a partitioned queue: enqueued %d, want 12", st["enqueued"])
	}
	written := 0
	for _, n := range ledger.PartitionNames("orders", 3) {
		ps, err := insp.Stats(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if ps["enqueued"] > 0 {
			written++
			if ps["seq"] == 0 {
				t.Errorf("partition %s: no seq in its own Stats: %v", n, ps)
			}
		}
	}
	if written < 2 {
		t.Fatalf("the jobs went to %d partition(s), want at least 2 for a sum", written)
	}
	if ps, err := insp.Stats(ctx, "plain"); err != nil || ps["seq"] == 0 {
		t.Errorf("Stats of a queue of one name: %v, %v; want its seq", ps, err)
	}
	ov, err := insp.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ov {
		switch o.Queue {
		case "orders":
			if seq, ok := o.Stats["seq"]; ok {
				t.Errorf("Overview of a partitioned queue has seq %d, a sum of its partitions' sequences", seq)
			}
			for i, ps := range o.PartitionStats {
				if ps["enqueued"] > 0 && ps["seq"] == 0 {
					t.Errorf("Overview's partition %d: no seq: %v", i, ps)
				}
			}
		case "plain":
			if o.Stats["seq"] == 0 {
				t.Errorf("Overview of a queue of one name: no seq: %v", o.Stats)
			}
		}
	}
}
