package otelfencedq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// A bridged job whose asynq task is gone while the job is unfinished (a
// failover rewound asynq's record of it, an operator deleted it) is
// delivered again by a new task Bridge.Redeliver enqueues. That delivery's
// attempt span continues the enqueuer's trace as the first delivery's did:
// the ledger keeps the first delivery's headers, trace context included,
// and the new task carries them. The job has a retry left (the verdict
// "not applied" on its first attempt is a failed attempt), and its first
// delivery pauses the queue, so asynq never retries the task before it is
// deleted.
func TestRedeliveredBridgedTaskKeepsTheEnqueuersTrace(t *testing.T) {
	opts := asynqfence.Options{Reconcile: func(string) asynqfence.ReconcileFunc {
		return func(context.Context, *jobs.Record) (jobs.Verdict, error) { return jobs.NotApplied, nil }
	}}
	var ran atomic.Bool
	var insp *asynq.Inspector
	bg := newBridgedWith(t, opts, func(mux *asynq.ServeMux) {
		mux.HandleFunc("payment", func(context.Context, *asynq.Task) error {
			if !ran.Swap(true) {
				if err := insp.PauseQueue("default"); err != nil {
					return err
				}
				return jobs.Unknown(errors.New("the card network timed out"))
			}
			return nil
		})
	})
	insp = asynq.NewInspectorFromRedisClient(bg.srv.Client())
	ctx, parent := bg.tp.Tracer("test").Start(context.Background(), "checkout")
	task := asynq.NewTaskWithHeaders("payment", []byte(`{}`), otelfencedq.TaskHeaders(ctx, nil))
	parent.End()
	if _, err := bg.client.Enqueue(task, asynq.TaskID("task-1"), asynq.MaxRetry(1), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := bg.returned.WaitOrTimeout(); !errors.Is(err, asynqfence.ErrUncertain) {
		t.Fatalf("the first delivery returned %v, want ErrUncertain", err)
	}
	redistest.Await(t, bg.srv.Client(), "asynq:{default}:", "task-1 waiting for its retry", func() bool {
		info, err := insp.GetTaskInfo("default", "task-1")
		return err == nil && (info.State == asynq.TaskStateRetry || info.State == asynq.TaskStatePending)
	})
	// The task is gone from asynq, its headers with it.
	if err := insp.DeleteTask("default", "task-1"); err != nil {
		t.Fatal(err)
	}
	if err := insp.UnpauseQueue("default"); err != nil {
		t.Fatal(err)
	}
	if n, err := bg.bridge.Redeliver(context.Background()); err != nil || n != 1 {
		t.Fatalf("Redeliver: %d, %v; want the job delivered again", n, err)
	}
	// The new task's first delivery may find the job's retry not yet due
	// and hand it back to asynq, which delivers it again.
	for err := bg.returned.WaitOrTimeout(); err != nil; err = bg.returned.WaitOrTimeout() {
		if ran.Load() && errors.Is(err, asynqfence.ErrUncertain) {
			t.Fatalf("the new task's delivery returned %v", err)
		}
		t.Logf("the new task's delivery returned %v; waiting for the next", err)
	}
	got := bg.spans("attempt payment")
	if len(got) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(got))
	}
	for i, s := range got {
		if s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("delivery %d: parent %v trace %v, want a child of the enqueuer's span %v",
				i+1, s.Parent.SpanID(), s.SpanContext.TraceID(), parent.SpanContext())
		}
	}
	if a, o := attr(got[1], otelfencedq.AttrAttempt).String(), attr(got[1], otelfencedq.AttrOutcome).String(); a != "2" || o != "succeeded" {
		t.Errorf("the redelivered attempt: attempt %q outcome %q, want 2 and succeeded", a, o)
	}
}
