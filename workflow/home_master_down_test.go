package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestFirstEnqueueWithAQueuesMasterDown: with another queue's master
// down (killed, or hung: its reads time out), a first enqueue of a workflow operation id cannot tell whether a
// workflow of it has its home in that queue (enqueued before with a first
// step there), so it writes nothing and fails with jobs.ErrNotSent and a
// *PartialError naming the queue, saying so; it never writes the workflow
// a second time. Workflows without an operation id, and operation ids
// found in a queue read, are enqueued as usual.
func TestFirstEnqueueWithAQueuesMasterDown(t *testing.T) {
	t.Run("killed", func(t *testing.T) { firstEnqueueWithMasterDown(t, false) })
	t.Run("hung", func(t *testing.T) { firstEnqueueWithMasterDown(t, true) })
}

func firstEnqueueWithMasterDown(t *testing.T, hang bool) {
	ctx := context.Background()
	d := startMasterDown(t)
	e := d.env
	on := func(q string) *workflow.Workflow {
		return workflow.New("order").Add("a", step("a"), workflow.Options(jobs.Queue(q)))
	}
	// order-1 first enqueued with its home in lost; order-2 in live
	first, err := workflow.Enqueue(ctx, e.client, on(d.lost), workflow.OperationID("order-1"))
	if err != nil {
		t.Fatal(err)
	}
	known, err := workflow.Enqueue(ctx, e.client, on(d.live), workflow.OperationID("order-2"))
	if err != nil {
		t.Fatal(err)
	}
	if hang {
		d.hang()
	} else {
		d.kill()
	}
	for _, op := range []string{"order-1", "order-3"} {
		res, err := workflow.Enqueue(ctx, e.client, on(d.live), workflow.OperationID(op))
		var pe *jobs.PartialError
		if !errors.Is(err, jobs.ErrNotSent) || errors.Is(err, jobs.ErrEnqueueUnknown) || !errors.As(err, &pe) ||
			len(pe.Unreachable) != 1 || pe.Unreachable[0] != d.lost ||
			!strings.Contains(err.Error(), "whether workflow operation "+op+" was enqueued before is unknown") ||
			!strings.Contains(err.Error(), "queue "+d.lost+" could not be read") {
			t.Fatalf("first enqueue of %s in %s with %s's master down = %+v, %v; want jobs.ErrNotSent naming %s", op, d.live, d.lost, res, err, d.lost)
		}
	}
	// nothing written for either: the live queue holds order-2's step only
	list, err := workflow.List(ctx, e.client, 0, 10)
	d.partial("List", err)
	if len(list) != 1 || list[0].ID != known.ID || list[0].ID == first.ID {
		t.Fatalf("List with %s's master down = %+v, want order-2's workflow only", d.lost, list)
	}
	again, err := workflow.Enqueue(ctx, e.client, on(d.live), workflow.OperationID("order-2"))
	if err != nil || !again.Deduplicated || again.ID != known.ID {
		t.Fatalf("enqueue of order-2 again = %+v, %v, want it deduplicated", again, err)
	}
	if _, err := workflow.Enqueue(ctx, e.client, on(d.live)); err != nil {
		t.Fatalf("enqueue without an operation id in %s with %s's master down: %v", d.live, d.lost, err)
	}
}
