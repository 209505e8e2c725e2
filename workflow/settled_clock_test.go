package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/workflow"
)

// A finished workflow is kept for the retention on the namespace's time,
// the clock its steps' jobs are kept by and the pruner reads: the
// maintenance leader settling it records when it finished on that time,
// not on its own clock. With Redis an hour off the leader's clock (a node
// whose clock is off, a tenure whose offset carries the time across a
// failover), the workflow is pruned once its retention passed and its steps
// are gone: not an hour early or late, nor a whole retention late (a record looked
// at too early while its step was kept is looked at again a retention on).
func TestFinishedWorkflowIsKeptOnTheNamespacesTime(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{ClockShim: true})
			srv.SetClockOffset(skew)
			e := newEnvWith(t, srv.Client(), redistest.Namespace(t), time.Second)
			ctx := context.Background()
			res, err := workflow.Enqueue(ctx, e.client, workflow.New("report").Add("only", step("only")))
			if err != nil {
				t.Fatal(err)
			}
			only := res.Steps["only"]
			if _, err := e.client.Cancel(ctx, only.Queue, only.JobID, "ops", ""); err != nil {
				t.Fatal(err)
			}
			if _, outcome, _, err := e.ledger.SettleWorkflow(ctx, res.Home, res.ID, "test"); err != nil || outcome == "" {
				t.Fatalf("settle: outcome %q, %v; want it final", outcome, err)
			}
			now, err := e.ledger.ReadTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			later := now.Add(3 * time.Second) // past the retention, on the namespace's time
			// the step's job expired (its retention passed)
			if err := e.rdb.Del(ctx, e.ledger.JobKey(only.Queue, only.JobID)).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := e.ledger.PruneWorkflows(ctx, res.Home, now); err != nil || n != 0 {
				t.Fatalf("pruned %d workflows, %v, before its retention passed", n, err)
			}
			if n, err := e.ledger.PruneWorkflows(ctx, res.Home, later); err != nil || n != 1 {
				t.Fatalf("pruned %d workflows, %v; want the finished one, its step gone and its retention past", n, err)
			}
		})
	}
}
