package jobs_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestEventsOfNoneOrFewerIsNone: Inspector.Events with n 0 or negative
// returns no events, as a partitioned queue's did, instead of the whole
// feed (0) or all but its oldest (negative) of an unpartitioned queue.
func TestEventsOfNoneOrFewerIsNone(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	for range 3 { // the second and third are deduplicated: two events
		if _, err := c.Enqueue(ctx, noteArgs{}, jobs.OperationID("op-1")); err != nil {
			t.Fatal(err)
		}
	}
	insp := c.Inspector()
	all, err := insp.Events(ctx, jobs.DefaultQueue, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Fatalf("%d events, want at least 2 (two deduplicated enqueues)", len(all))
	}
	for _, n := range []int{0, -1, -100} {
		evs, err := insp.Events(ctx, jobs.DefaultQueue, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 0 {
			t.Errorf("Events(n=%d): %d events, want none", n, len(evs))
		}
	}
	if evs, err := insp.Events(ctx, jobs.DefaultQueue, 1); err != nil || len(evs) != 1 {
		t.Errorf("Events(n=1): %d events, %v; want 1", len(evs), err)
	}
}
