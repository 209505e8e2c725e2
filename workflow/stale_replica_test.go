package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// A workflow enqueued again by its operation id through a primary that a
// failover demoted, and that cannot reach the new primary yet (a read-only
// replica still serving its old data, which the new primary may have
// lost), is refused with jobs.ErrWriteRefused: its old data is no
// acknowledgement, and a deduplication it answered could tell the caller
// a workflow exists that the primary lost. On a primary, the same enqueue
// is deduplicated, and counted as one.
func TestWorkflowEnqueuedAgainOnADemotedPrimaryIsRefused(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	w := workflow.New("order").Add("a", Step{Name: "a"}).Add("b", Step{Name: "b"}, workflow.After("a"))
	first, err := workflow.Enqueue(ctx, c, w, workflow.OperationID("order:7"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := workflow.Enqueue(ctx, c, w, workflow.OperationID("order:7"))
	if err != nil || !again.Deduplicated || again.ID != first.ID {
		t.Fatalf("enqueued again on the primary: %+v, %v; want deduplicated to %s", again, err, first.ID)
	}
	stats, err := c.Inspector().Stats(ctx, first.Home)
	if err != nil {
		t.Fatal(err)
	}
	if stats["deduplicated_enqueue"] != 1 {
		t.Fatalf("deduplicated_enqueue = %d after one deduplicated workflow enqueue, want 1", stats["deduplicated_enqueue"])
	}

	// Demoted: a replica of a primary it cannot reach, serving stale data.
	if err := rdb.ReplicaOf(ctx, "127.0.0.1", fmt.Sprint(redistest.FreePort(t))).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Enqueue(ctx, c, w, workflow.OperationID("order:7"))
	if !errors.Is(err, jobs.ErrWriteRefused) {
		t.Fatalf("enqueued again on a demoted primary: %+v, %v; want jobs.ErrWriteRefused", res, err)
	}
}
