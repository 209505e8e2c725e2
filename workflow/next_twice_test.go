package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestEnqueueMiddlewareNextTwiceWritesTheWorkflowOnce: an enqueue
// middleware calling next a second time for a workflow's steps gets
// jobs.ErrNextCalled, writing no second workflow.
func TestEnqueueMiddlewareNextTwiceWritesTheWorkflowOnce(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	second := make(chan error, 1)
	twice := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			res, err := next(ctx, reqs)
			again, err2 := next(ctx, reqs)
			if again != nil {
				err2 = errors.New("a second call returned results")
			}
			second <- err2
			return res, err
		}
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{twice}})
	w := workflow.New("order").Add("charge", step("charge"))
	if _, err := workflow.Enqueue(ctx, client, w); err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, jobs.ErrNextCalled) {
		t.Fatalf("second call of next: %v, want jobs.ErrNextCalled", err)
	}
	if n, err := client.Inspector().Counts(ctx, "default"); err != nil || n[jobs.Pending] != 1 {
		t.Fatalf("queue default: %v jobs (%v), want the one step written once", n, err)
	}
}
