package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
)

type orderArgs struct {
	N int `json:"n"`
}

func (orderArgs) Kind() string { return "order" }

// TestOperationIDNamesOneJobAcrossTheBridge: a task carrying an operation
// id and a native enqueue of the same operation id in the same queue are
// one job, whichever comes first: the native enqueue of a bridged
// operation is deduplicated to the bridged job, and the delivery of a task
// whose operation a native job holds is refused as a conflict (nothing
// runs twice).
func TestOperationIDNamesOneJobAcrossTheBridge(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("order", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return nil
		})
	})
	ctx := context.Background()
	client := jobs.NewClient(p.rdb, jobs.Config{Namespace: p.ledger.Namespace()})

	// Bridged first.
	task := asynq.NewTaskWithHeaders("order", []byte(`{"n":1}`), map[string]string{asynqfence.OperationHeader: "order-42"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-42")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the task's delivery returned %v", err)
	}
	jobstest.WaitState(t, p.ledger, "default", "order-42", jobs.Succeeded)
	res, err := client.Enqueue(ctx, orderArgs{N: 1}, jobs.OperationID("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Deduplicated || res.JobID != "order-42" {
		t.Fatalf("native enqueue of a bridged operation: %+v; want deduplicated to job order-42", res)
	}

	// Native first.
	native, err := client.Enqueue(ctx, orderArgs{N: 2}, jobs.OperationID("order-43"))
	if err != nil || native.Deduplicated {
		t.Fatalf("native enqueue: %+v, %v", native, err)
	}
	task = asynq.NewTaskWithHeaders("order", []byte(`{"n":2}`), map[string]string{asynqfence.OperationHeader: "order-43"})
	if _, err := p.client.Enqueue(task, asynq.TaskID("t-43")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrConflict) {
		t.Fatalf("delivery of an operation a native job holds returned %v, want ErrConflict", err)
	}
	if _, err := p.ledger.Get(ctx, "default", "order-43"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a bridged job order-43 beside the native one: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the asynq handler ran %d times, want once (order-42)", n)
	}
}
