package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestGroupsOfAPartitionedQueueDeepestFirst: the groups of a partitioned
// queue come deepest first across its partitions, not partition after
// partition.
func TestGroupsOfAPartitionedQueueDeepestFirst(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	// In each partition a group of one job and a deeper one (2, 3, 4 jobs).
	seen := map[string]bool{}
	for i := 0; len(seen) < 3; i++ {
		key := fmt.Sprint("k", i)
		r := enqueued(t, c, partArgs{Account: key}, jobs.Queue("orders"), jobs.Group("one-"+key), jobs.Delay(time.Hour))
		if seen[r.Partition] {
			continue
		}
		seen[r.Partition] = true
		for range len(seen) + 1 {
			enqueued(t, c, partArgs{Account: key}, jobs.Queue("orders"), jobs.Group("deep-"+key), jobs.Delay(time.Hour))
		}
	}
	gs, err := c.Inspector().Groups(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(gs); i++ {
		if gs[i].Pending > gs[i-1].Pending {
			t.Fatalf("groups not deepest first: %+v", gs)
		}
	}
	if len(gs) < 6 || gs[0].Pending != 4 {
		t.Fatalf("groups: %+v", gs)
	}
}
