package workflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestLimitedStepsOfAPartitionedQueueShareTheirLimit: on a partitioned
// queue a step under a concurrency limit (or a rate) goes, as a job does,
// to the partition its limit's key picks, not to its workflow's: the steps
// of many workflows under one limit of 1 meet one partition's permits, so
// claiming every partition starts one of them, never one per partition.
func TestLimitedStepsOfAPartitionedQueueShareTheirLimit(t *testing.T) {
	ctx := context.Background()
	const p = 4
	parts := ledger.PartitionNames("exports", p)
	for _, flow := range []struct {
		name string
		opt  jobs.Option
	}{
		{"limit", jobs.Limit("export:acct-1", 1)},
		{"rate", jobs.Rate("provider", 1, time.Hour)},
	} {
		t.Run(flow.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.client.SetPartitions(ctx, "exports", p, "test", ""); err != nil {
				t.Fatal(err)
			}
			used := map[string]bool{}
			for i := range 8 {
				w := workflow.New("export").
					Add("export", Slow{Name: "export"}, workflow.Options(jobs.Queue("exports"), flow.opt)).
					Add("notify", step("notify"), workflow.After("export"), workflow.Options(jobs.Queue("exports")))
				res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID(fmt.Sprintf("%s-%d", flow.name, i)))
				if err != nil {
					t.Fatal(err)
				}
				used[res.Steps["export"].Queue] = true
			}
			if len(used) != 1 {
				t.Errorf("the limited steps of 8 workflows went to %d partitions %v: each has its own permits", len(used), used)
			}
			started := 0
			for _, q := range parts {
				c, err := e.ledger.Claim(ctx, q, "t", time.Minute, 10)
				if err != nil {
					t.Fatal(err)
				}
				started += len(c.Jobs)
			}
			if started != 1 {
				t.Fatalf("claiming every partition started %d steps under a %s of 1", started, flow.name)
			}
		})
	}
}
