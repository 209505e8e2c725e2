package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestPartitionedLimitAndRateRouteByLimit pins the documented routing of
// a partitioned queue's jobs without a partition key: a job with a rate
// alone goes where its rate's key says, so the rate holds across the
// queue; a job with a limit and a rate on another key goes where its
// limit's key says, so jobs of one rate and different limit keys spread
// over the partitions and the rate is counted in each (up to P times its
// max across the queue), as README.md states.
func TestPartitionedLimitAndRateRouteByLimit(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	if _, err := c.SetPartitions(ctx, "calls", 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	rate := jobs.Rate("provider:api", 100, time.Second)
	rateOnly := map[string]bool{}
	both := map[string]bool{}
	for i := range 32 {
		res, err := c.Enqueue(ctx, countArgs{N: i}, jobs.Queue("calls"), rate)
		if err != nil {
			t.Fatal(err)
		}
		rateOnly[res.Partition] = true
		key := fmt.Sprintf("export:cust-%d", i)
		res, err = c.Enqueue(ctx, countArgs{N: i}, jobs.Queue("calls"), rate, jobs.Limit(key, 5))
		if err != nil {
			t.Fatal(err)
		}
		both[res.Partition] = true
		alone, err := c.Enqueue(ctx, countArgs{N: i}, jobs.Queue("calls"), jobs.Limit(key, 5))
		if err != nil {
			t.Fatal(err)
		}
		if alone.Partition != res.Partition {
			t.Errorf("limit %s with a rate went to %s, without to %s: want its limit's partition", key, res.Partition, alone.Partition)
		}
	}
	if len(rateOnly) != 1 {
		t.Errorf("jobs of rate provider:api alone went to %d partitions, want one", len(rateOnly))
	}
	if len(both) < 2 {
		t.Errorf("jobs of one rate and 32 limit keys went to %d partition(s), want them spread by their limit keys", len(both))
	}
}
