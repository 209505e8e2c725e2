package workflow_test

import (
	"context"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestConcurrentEnqueueOfOneWorkflow: 64 goroutines enqueue the same
// workflow (one operation id, steps in two queues) at once: every call
// returns the same workflow, exactly one of them not deduplicated, and
// each step runs once.
func TestConcurrentEnqueueOfOneWorkflow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	build := func() *workflow.Workflow {
		return workflow.New("race").
			Add("a", step("a")).
			Add("b", step("b", "a"), workflow.After("a"), workflow.Options(jobs.Queue("wf-other"))).
			Add("c", step("c", "b"), workflow.After("b"))
	}
	const n = 64
	res := make([]*workflow.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = workflow.Enqueue(ctx, e.client, build(), workflow.OperationID("race-1"))
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if res[i].ID != res[0].ID || res[i].Home != res[0].Home || res[i].Steps["b"] != res[0].Steps["b"] {
			t.Fatalf("enqueue %d returned %+v, enqueue 0 %+v: want one workflow", i, res[i], res[0])
		}
		if !res[i].Deduplicated {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d enqueues not deduplicated, want 1", fresh)
	}
	e.start(jobs.DefaultQueue, "wf-other")
	e.wait(res[0], "c", jobs.Succeeded)
	for _, s := range []string{"a", "b", "c"} {
		if got := e.runs.count(s); got != 1 {
			t.Errorf("step %s ran %d times, want once", s, got)
		}
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d workflows listed, want 1", len(list))
	}
}
