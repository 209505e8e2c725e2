package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestSpreadEnqueuesAvoidAPartitionsMasterDown: with the master of some of
// a partitioned queue's partitions killed, enqueues of jobs that any
// partition may hold (no partition key, operation id, unique, limit or
// rate key) all succeed, one by one and in one EnqueueMany, each written
// to a partition a master still up holds; a job whose key routes it to a
// lost partition still fails with ErrNotSent, nothing written.
func TestSpreadEnqueuesAvoidAPartitionsMasterDown(t *testing.T) {
	d := startMasterDown(t)
	ctx := context.Background()
	// more enqueues than partitions: the even spread meets every one
	for i := range 2 * len(d.names) {
		r, err := d.client.Enqueue(ctx, partArgs{}, jobs.Queue("orders"))
		if err != nil {
			t.Fatalf("enqueue %d with a partition's master down: %v", i, err)
		}
		if d.lost[r.Partition] {
			t.Fatalf("enqueue %d reported written in %s, whose master is down", i, r.Partition)
		}
	}
	ps := make([]jobs.Params, 2*len(d.names))
	for i := range ps {
		ps[i] = jobs.Params{Args: partArgs{}, Options: []jobs.Option{jobs.Queue("orders")}}
	}
	rs, err := d.client.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatalf("EnqueueMany with a partition's master down: %v", err)
	}
	for i, r := range rs {
		if r == nil || d.lost[r.Partition] {
			t.Fatalf("EnqueueMany job %d: %+v", i, r)
		}
		if _, err := d.client.Inspector().Get(ctx, r.Partition, r.JobID); err != nil {
			t.Fatalf("EnqueueMany job %d not found in %s: %v", i, r.Partition, err)
		}
	}
	// a keyed job keeps its partition: it is not moved
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("acct-%d", i); d.lost[d.names[ledger.RoutePartition(len(d.names), k, "", 0)]] {
			key = k
		}
	}
	if r, err := d.client.Enqueue(ctx, partArgs{}, jobs.Queue("orders"), jobs.PartitionKey(key)); !errors.Is(err, jobs.ErrNotSent) {
		t.Fatalf("keyed enqueue to a lost partition = %+v, %v; want ErrNotSent", r, err)
	}
}
