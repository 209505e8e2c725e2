package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestInvalidNamespaceRefusedBeforeWriting: a client whose namespace is
// invalid (here with a brace, which would move its keys' hash slot) is
// refused by every workflow call with jobs.ErrInvalid, as by the client's
// own calls, and nothing is written under it.
func TestInvalidNamespaceRefusedBeforeWriting(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	bad := ns + "{x} y"
	c := jobs.NewClient(rdb, jobs.Config{Namespace: bad})
	if _, err := c.Enqueue(ctx, step("a")); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("jobs enqueue: %v, want ErrInvalid", err)
	}
	if res, err := workflow.Enqueue(ctx, c, workflow.New("x").Add("a", step("a"))); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Enqueue: %+v, %v, want ErrInvalid", res, err)
	}
	if l, err := workflow.List(ctx, c, 0, 10); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("List: %v, %v, want ErrInvalid", l, err)
	}
	if _, err := workflow.Get(ctx, c, "wf-x"); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Get: %v, want ErrInvalid", err)
	}
	if _, err := workflow.Cancel(ctx, c, "wf-x", "alice", ""); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("Cancel: %v, want ErrInvalid", err)
	}
	if keys, err := rdb.Keys(ctx, ns+"*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("keys written under the invalid namespace: %v %v", keys, err)
	}
}
