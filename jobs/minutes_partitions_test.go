package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestMinutesOfAPartitionedQueue: a partitioned queue's per-minute counts
// are its partitions' summed (the queue's own name from before it had
// partitions included), and a partition's name reads that partition's.
func TestMinutesOfAPartitionedQueue(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.Enqueue(ctx, partArgs{Account: "before"}, jobs.Queue("orders")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "orders", 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	var last *jobs.Result
	for _, a := range []string{"a", "b", "c", "d", "e"} {
		r, err := c.Enqueue(ctx, partArgs{Account: a}, jobs.Queue("orders"), jobs.PartitionKey(a))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	now, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enqueued := func(q string) int64 {
		t.Helper()
		ms, err := insp.Minutes(ctx, q, now.Add(-time.Hour), now)
		if err != nil {
			t.Fatalf("minutes of %s: %v", q, err)
		}
		var n int64
		for _, m := range ms {
			n += m.Counts["enqueued"]
		}
		return n
	}
	if n := enqueued("orders"); n != 6 {
		t.Fatalf("queue orders counted %d enqueued, want 6", n)
	}
	if n := enqueued(last.Partition); n < 1 {
		t.Fatalf("partition %s counted %d enqueued, want at least 1", last.Partition, n)
	}
}
