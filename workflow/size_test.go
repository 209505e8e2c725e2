package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowArgsAreBounded: a workflow whose steps' args add up to more
// than workflow.MaxPayloadBytes (each step within jobs.MaxPayloadBytes) is
// refused as ErrInvalid, naming the bound, with nothing written: its home
// queue's steps are written by one script call, which must not carry up to
// MaxSteps megabyte payloads at once. One at the bound is enqueued.
func TestWorkflowArgsAreBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	build := func(total int) *workflow.Workflow {
		w := workflow.New("heavy")
		per := jobs.MaxPayloadBytes / 2
		for i := 0; total > 0; i++ {
			n := per
			if i == 0 {
				n += total % per // the rest rides on the first step
			}
			total -= n
			// Step's JSON is {"name":"<name>"}: 11 bytes around the name
			w.Add(fmt.Sprintf("s%d", i), step(strings.Repeat("x", n-11)))
		}
		return w
	}
	over := build(workflow.MaxPayloadBytes + 1)
	if _, err := workflow.Enqueue(ctx, e.client, over); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("a workflow of %d bytes of args: %v, want ErrInvalid naming the bound", workflow.MaxPayloadBytes+1, err)
	}
	if keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*").Result(); len(keys) != 0 {
		t.Fatalf("the refused workflow wrote %d keys: %v", len(keys), keys)
	}
	if _, err := workflow.Enqueue(ctx, e.client, build(workflow.MaxPayloadBytes)); err != nil {
		t.Fatalf("a workflow of %d bytes of args: %v", workflow.MaxPayloadBytes, err)
	}
}

// TestLargestWorkflowReadsInFewRoundTrips: a workflow of MaxSteps steps
// enqueues, and workflow.Get (the dashboard's workflow page) reads its
// status in a few round trips, not one or more per step: a page listing
// up to a hundred such workflows answers. The maintenance leader's settling
// of it is as cheap.
func TestLargestWorkflowReadsInFewRoundTrips(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := workflow.New("wide").Add("root", step("root"))
	for i := 1; i < workflow.MaxSteps; i++ {
		w.Add(fmt.Sprintf("s%d", i), step("s"), workflow.After("root"))
	}
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	hooked := redis.NewClient(e.rdb.(*redis.Client).Options())
	defer hooked.Close()
	trips := &redistest.RoundTrips{}
	hooked.AddHook(trips)
	c := jobs.NewClient(hooked, jobs.Config{Namespace: e.ns})
	defer c.Close()
	trips.Reset()
	st, err := workflow.Get(ctx, c, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != workflow.MaxSteps || len(st.Steps) != workflow.MaxSteps {
		t.Fatalf("status of %d steps (total %d), want %d", len(st.Steps), st.Total, workflow.MaxSteps)
	}
	for _, s := range st.Steps {
		if s.State == "missing" {
			t.Fatalf("step %s reads as missing", s.Name)
		}
	}
	if n := trips.N(); n > 30 {
		t.Errorf("workflow.Get of %d steps took %d round trips, want at most 30", workflow.MaxSteps, n)
	}
	// The maintenance leader settles every open workflow on each pass:
	// reading its steps' states is a few round trips too (it was one
	// whole-record read per step).
	l := ledger.New(hooked, ledger.Config{Namespace: e.ns})
	trips.Reset()
	if _, outcome, _, err := l.SettleWorkflow(ctx, res.Home, res.ID, "test"); err != nil || outcome != "" {
		t.Fatalf("settle: outcome %q, %v; want the workflow still running", outcome, err)
	}
	if n := trips.N(); n > 30 {
		t.Errorf("settling a workflow of %d steps took %d round trips, want at most 30", workflow.MaxSteps, n)
	}
}
