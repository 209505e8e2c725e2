package asynqfence_test

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
)

// TestMiddlewareInstalledTwiceRunsOnce: the bridge's middleware installed
// twice on one chain (ServeMux.Use and around the mux, say) runs the
// handler under the outer delivery's attempt, instead of the inner one
// finding the job busy under the outer one's lease on every delivery.
func TestMiddlewareInstalledTwiceRunsOnce(t *testing.T) {
	var mux *asynq.ServeMux
	p := startInProcess(t, func(m *asynq.ServeMux) {
		mux = m
		mux.HandleFunc("twice", func(context.Context, *asynq.Task) error { return nil })
	})
	mux.Use(p.bridge.Middleware()) // the mux's chain reads its middleware per task
	if _, err := p.client.Enqueue(asynq.NewTask("twice", []byte(`{}`)), asynq.TaskID("w1"), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the delivery returned %v, want the job run", err)
	}
	if rec := p.record("w1"); rec.State != jobs.Succeeded || rec.Attempts != 1 {
		t.Fatalf("the job is %s after %d attempts, want succeeded after 1", rec.State, rec.Attempts)
	}
}
