package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// A workflow enqueue whose Redis refuses the connection fails with
// jobs.ErrNotSent (the workflow was not committed), not as an unknown
// outcome, whether or not it names an operation id.
func TestWorkflowEnqueueNeverSentIsNotUnknown(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)})
	w := workflow.New("order").Add("a", Step{Name: "a"}).Add("b", Step{Name: "b"}, workflow.After("a"))
	if _, err := workflow.Enqueue(ctx, c, w); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for _, opts := range [][]workflow.Option{nil, {workflow.OperationID("order:8")}} {
		res, err := workflow.Enqueue(ctx, c, w, opts...)
		if !errors.Is(err, jobs.ErrNotSent) || errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Fatalf("workflow enqueue (options %v) with Redis down: %+v, %v; want jobs.ErrNotSent, not an unknown outcome", opts, res, err)
		}
	}
}
