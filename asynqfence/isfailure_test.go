package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
)

// TestIsFailureKeepsRetriesOfDeliveriesThatDidNotRun: with
// asynqfence.IsFailure, deliveries to a paused ledger queue spend none of
// the task's retries: after more deliveries than it has retries the task
// is still waiting to be retried, not archived, and it runs once the queue
// is resumed.
func TestIsFailureKeepsRetriesOfDeliveriesThatDidNotRun(t *testing.T) {
	var runs atomic.Int32
	cfg := testServerConfig()
	cfg.IsFailure = asynqfence.IsFailure
	p := startInProcessServer(t, asynqfence.Options{WorkerID: "in-process"}, cfg, func(mux *asynq.ServeMux) {
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
		asynq.MaxRetry(1), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.next(); !errors.Is(err, asynqfence.ErrPaused) {
			t.Fatalf("delivery %d to a paused queue returned %v, want ErrPaused", i+1, err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	info, err := insp.GetTaskInfo("default", "i1")
	if err != nil {
		t.Fatal(err)
	}
	if info.State == asynq.TaskStateArchived || info.Retried != 0 {
		t.Fatalf("after 3 deliveries that did not run: task %s, retried %d; want it kept, no retry spent", info.State, info.Retried)
	}
	if _, err := p.ledger.SetPaused(ctx, "default", false, "ops", "over"); err != nil {
		t.Fatal(err)
	}
	for {
		if err := p.next(); err == nil {
			break
		} else if !errors.Is(err, asynqfence.ErrPaused) {
			t.Fatalf("delivery after the resume returned %v", err)
		}
	}
	rec := jobstest.WaitState(t, p.ledger, "default", "i1", jobs.Succeeded)
	if runs.Load() != 1 || rec.Attempts != 1 {
		t.Fatalf("handler ran %d times, %d attempts; want once", runs.Load(), rec.Attempts)
	}
}

func TestIsFailure(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("%w: w1 holds it", asynqfence.ErrBusy), false},
		{fmt.Errorf("%w: default", asynqfence.ErrPaused), false},
		{fmt.Errorf("%w: redis: connection refused", asynqfence.ErrNotClaimed), false},
		{errors.New("the handler failed"), true},
		{fmt.Errorf("%w: job j", asynqfence.ErrUncertain), true},
		{fmt.Errorf("%w: job j: %w", asynqfence.ErrReview, asynq.SkipRetry), true},
	}
	for _, c := range cases {
		if got := asynqfence.IsFailure(c.err); got != c.want {
			t.Errorf("IsFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
