package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// busyArgs is a job that keeps its queue's backlog: each run enqueues
// another, so its pool always has a due job to claim.
type busyArgs struct{}

func (busyArgs) Kind() string { return "busy" }

type placedArgs struct{}

func (placedArgs) Kind() string { return "placed" }

// TestBusyPoolClaimsNewPartitions: a pool that never runs out of due jobs
// still claims from a queue's new partitions after its count changes, as
// an idle one does, instead of only once every queue drained.
func TestBusyPoolClaimsNewPartitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.Concurrency = 1
	cfg.Queues = map[string]int{"orders": 1, "bulk": 1}
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	ran := make(chan struct{}, 1)
	if err := worker.Register(p, jobs.WorkFunc[busyArgs](func(ctx context.Context, _ *jobs.Job[busyArgs]) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		_, err := e.client.Enqueue(ctx, busyArgs{}, jobs.Queue("bulk"))
		return err
	})); err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.WorkFunc[placedArgs](func(context.Context, *jobs.Job[placedArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	for range 3 { // a backlog of three: every claim leaves more due
		e.enqueue(busyArgs{}, jobs.Queue("bulk"))
	}
	e.start(p)
	<-ran
	if _, err := e.client.SetPartitions(ctx, "orders", 2, "test", "busy pool"); err != nil {
		t.Fatal(err)
	}
	res := e.enqueue(placedArgs{}, jobs.Queue("orders"))
	if res.Partition == "orders" {
		t.Fatalf("the order went to %s, not a partition", res.Partition)
	}
	// The pool reads the partitions every few seconds: a minute is ample.
	jobstest.WaitStateWithin(t, e.ledger, res.Partition, res.JobID, jobs.Succeeded, time.Minute)
}
