package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A Redis restart loses every partition of a partitioned queue at once:
// the client finds each partition rewound, and counts one loss of the
// queue in fencedq_ledger_rewinds_total, not one per partition.
func TestPartitionsRewoundInOneLossCountOnce(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	reg := prometheus.NewRegistry()
	c := jobs.NewClient(srv.Client(), jobs.Config{Namespace: redistest.Namespace(t), Registerer: reg})
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.SetPartitions(ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for i := 0; len(parts) < 2 && i < 100; i++ {
		res, err := c.Enqueue(ctx, countArgs{N: i}, jobs.Queue("orders"), jobs.PartitionKey(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		parts[res.Partition] = true
	}
	if len(parts) != 2 {
		t.Fatalf("jobs in partitions %v, want both", parts)
	}

	srv.Restart() // every key is gone

	if _, err := c.Resubmit(ctx); err != nil { // it checks every queue the client wrote first
		t.Fatal(err)
	}
	if v := sum(t, reg, "fencedq_ledger_rewinds_total"); v != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total = %v, want 1", v)
	}
}
