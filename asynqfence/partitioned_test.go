package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestOperationIDNamesOneJobOnAPartitionedQueue: on a partitioned ledger
// queue, a task's job goes to the partition a native enqueue of its
// operation id goes to, so the two paths still name one job; and a job
// recorded before the queue had partitions is found where it is.
func TestOperationIDNamesOneJobOnAPartitionedQueue(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("order", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return nil
		})
	})
	ctx := context.Background()
	client := jobs.NewClient(p.rdb, jobs.Config{Namespace: p.ledger.Namespace()})

	// Bridged before the queue had partitions: a retry after the change
	// finds it.
	task := asynq.NewTaskWithHeaders("order", []byte(`{"n":0}`), map[string]string{asynqfence.OperationHeader: "order-41"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-41")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the task's delivery returned %v", err)
	}
	if _, err := client.SetPartitions(ctx, "default", 3, "test", "bridge"); err != nil {
		t.Fatal(err)
	}
	p.bridge.ForgetLayouts() // the bridge reads the layout again each jobs.PartitionRefresh
	task = asynq.NewTaskWithHeaders("order", []byte(`{"n":0}`), map[string]string{asynqfence.OperationHeader: "order-41"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-41b")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the second delivery returned %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("order-41 ran %d times, want once", n)
	}

	// Bridged first.
	task = asynq.NewTaskWithHeaders("order", []byte(`{"n":1}`), map[string]string{asynqfence.OperationHeader: "order-42"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-42")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the task's delivery returned %v", err)
	}
	res, err := client.Enqueue(ctx, orderArgs{N: 1}, jobs.OperationID("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Deduplicated || res.JobID != "order-42" {
		t.Fatalf("native enqueue of a bridged operation: %+v; want deduplicated to job order-42", res)
	}
	jobstest.WaitState(t, p.ledger, res.Partition, "order-42", jobs.Succeeded)

	// Native first.
	native, err := client.Enqueue(ctx, orderArgs{N: 2}, jobs.OperationID("order-43"))
	if err != nil || native.Deduplicated || !ledger.IsPartition(native.Partition) {
		t.Fatalf("native enqueue: %+v, %v", native, err)
	}
	task = asynq.NewTaskWithHeaders("order", []byte(`{"n":2}`), map[string]string{asynqfence.OperationHeader: "order-43"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-43")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrConflict) {
		t.Fatalf("delivery of an operation a native job holds returned %v, want ErrConflict", err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the asynq handler ran %d times, want twice (order-41, order-42)", n)
	}
}
