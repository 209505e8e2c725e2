package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
)

// TestRevokedTaskIsNotRunAgain: a handler that returns asynq.RevokeTask
// (asynq drops the task: no retry, no archive) ends its job, dead with the
// handler's error, instead of leaving it pending with no task, which
// Redeliver then gave a new one, running the handler again until the
// retries were used up.
func TestRevokedTaskIsNotRunAgain(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("revoke", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return fmt.Errorf("account closed: %w", asynq.RevokeTask)
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("revoke", []byte(`{}`)), asynq.TaskID("r1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynq.RevokeTask) {
		t.Fatalf("the bridge returned %v to asynq, want the handler's RevokeTask", err)
	}
	if rec := p.record("r1"); rec.State != jobs.Dead || rec.Attempts != 1 {
		t.Fatalf("after a revoked attempt the job is %s after %d attempts, want dead after 1", rec.State, rec.Attempts)
	}
	n, err := p.bridge.Redeliver(context.Background())
	if err != nil || n != 0 {
		t.Fatalf("Redeliver after the revoke: %d tasks, %v; want none", n, err)
	}
	if r := runs.Load(); r != 1 {
		t.Fatalf("the handler ran %d times, want once", r)
	}
}
