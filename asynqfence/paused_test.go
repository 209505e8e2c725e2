package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
)

// TestTaskFirstDeliveredToAPausedQueueIsNotLost: a task delivered while its
// ledger queue is paused does not run, and asynq spends a retry on it each
// time; once its retries are used up asynq archives it. The ledger records
// the job on that first delivery, waiting for its task, so after the queue
// is resumed Redeliver gives it a new task and it runs, once.
func TestTaskFirstDeliveredToAPausedQueueIsNotLost(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("invoice", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return nil
		})
	})
	ctx := context.Background()
	if _, err := p.ledger.SetPaused(ctx, "default", true, "ops", "incident"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.Enqueue(asynq.NewTask("invoice", []byte(`{"n":1}`)), asynq.TaskID("i1"),
		asynq.MaxRetry(0), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrPaused) {
		t.Fatalf("delivery to a paused queue returned %v, want ErrPaused", err)
	}
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	p.awaitTask(insp, "i1", asynq.TaskStateArchived)
	rec := p.record("i1")
	if rec.State != jobs.Pending || rec.Bridge != asynqfence.BridgeName || rec.Attempts != 0 {
		t.Fatalf("job after a delivery to the paused queue: %+v; want pending, bridged, never attempted", rec)
	}
	if n, err := p.bridge.Redeliver(ctx); err != nil || n != 0 {
		t.Fatalf("Redeliver while paused: %d, %v; want nothing", n, err)
	}
	if _, err := p.ledger.SetPaused(ctx, "default", false, "ops", "over"); err != nil {
		t.Fatal(err)
	}
	if n, err := p.bridge.Redeliver(ctx); err != nil || n != 1 {
		t.Fatalf("Redeliver after the resume: %d, %v; want the job delivered again", n, err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the new task's delivery returned %v", err)
	}
	rec = jobstest.WaitState(t, p.ledger, "default", "i1", jobs.Succeeded)
	if runs.Load() != 1 || rec.Attempts != 1 || string(rec.Payload) != `{"n":1}` {
		t.Fatalf("handler ran %d times, job %+v; want once, one attempt, the task's payload", runs.Load(), rec)
	}
}
