package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestTaskNamedLikeANativeOperationIsRefused: a job id starting with "="
// is how the ledger names the job of a native operation id
// ("=<queue>=<operation id>"). A task whose operation id or asynq task id
// has that form is refused (ErrInvalid, SkipRetry) before anything is
// recorded or run: recorded, it would take the operation's name, and a
// native enqueue of that operation would be deduplicated to the task's
// job, which is not its own.
func TestTaskNamedLikeANativeOperationIsRefused(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("order", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return nil
		})
	})
	ctx := context.Background()
	client := jobs.NewClient(p.rdb, jobs.Config{Namespace: p.ledger.Namespace()})
	tasks := map[string]*asynq.Task{
		"order-44": asynq.NewTaskWithHeaders("order", []byte(`{"n":44}`), map[string]string{asynqfence.OperationHeader: "=default=order-44"}),
		"order-45": asynq.NewTask("order", []byte(`{"n":45}`)),
	}
	for op, task := range tasks {
		if _, err := p.client.Enqueue(task, asynq.TaskID("=default="+op), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); !errors.Is(err, jobs.ErrInvalid) || !errors.Is(err, asynq.SkipRetry) {
			t.Fatalf("delivery of a task named =default=%s: %v, want ErrInvalid and SkipRetry", op, err)
		}
		res, err := client.Enqueue(ctx, orderArgs{N: 1}, jobs.OperationID(op))
		if err != nil || res.Deduplicated {
			t.Fatalf("native enqueue of operation %s after the task: %+v, %v; want a job of its own", op, res, err)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the asynq handler ran %d times, want never", n)
	}
}
