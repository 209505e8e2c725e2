package workflow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestConcurrentEnqueueAcrossAPartitionChange: 64 goroutines enqueue one
// workflow (one operation id) on a queue through two clients, one still
// routing by the partition count it read before the count changed, the
// other by the new count, so the two route its home to different queue
// names (growing, shrinking to none, partitioning a queue that had none):
// every call still returns one workflow, one call writes it, and each step
// runs once.
func TestConcurrentEnqueueAcrossAPartitionChange(t *testing.T) {
	for _, c := range [][2]int{{2, 3}, {3, 1}, {1, 2}} {
		t.Run(fmt.Sprintf("%d to %d", c[0], c[1]), func(t *testing.T) { raceAcrossChange(t, c[0], c[1]) })
	}
}

func raceAcrossChange(t *testing.T, from, to int) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "parts", from, "test", ""); err != nil {
		t.Fatal(err)
	}
	// an operation id whose workflow's home differs between the layouts
	// (its id is its steps' partition key)
	home := func(p int, id string) string {
		return ledger.PartitionNames("parts", p)[ledger.RoutePartition(p, id, "", 0)]
	}
	op := ""
	for i := 0; op == ""; i++ {
		o := fmt.Sprintf("change-%d", i)
		sum := sha256.Sum256([]byte(o))
		id := "wf-" + hex.EncodeToString(sum[:16])
		if home(from, id) != home(to, id) {
			op = o
		}
	}
	// old routes by the count from before (read now, kept for
	// jobs.PartitionRefresh)
	old := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns})
	t.Cleanup(func() { _ = old.Close() })
	if _, err := old.Enqueue(ctx, step("warm"), jobs.Queue("parts")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SetPartitions(ctx, "parts", to, "test", "change"); err != nil {
		t.Fatal(err)
	}
	build := func() *workflow.Workflow {
		opts := workflow.Options(jobs.Queue("parts"))
		return workflow.New("grow").
			Add("a", step("a"), opts).
			Add("b", step("b", "a"), workflow.After("a"), opts)
	}
	const n = 64
	res := make([]*workflow.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := e.client
		if i%2 == 0 {
			c = old
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = workflow.Enqueue(ctx, c, build(), workflow.OperationID(op))
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if res[i].Home != res[0].Home || res[i].Steps["b"] != res[0].Steps["b"] {
			t.Errorf("enqueue %d returned %+v, enqueue 0 %+v: want one workflow", i, res[i], res[0])
		}
		if !res[i].Deduplicated {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d enqueues not deduplicated, want 1", fresh)
	}
	e.start("parts")
	e.wait(res[0], "b", jobs.Succeeded)
	for _, s := range []string{"a", "b"} {
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
