package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type goodArgs struct{}

func (goodArgs) Kind() string { return "good" }

// TestFailingQueueDoesNotStopTheOthers: a queue whose claims fail (its
// master down, say; here its due index is broken) is backed off on its
// own: the pool's other queues are still claimed, also when the failing
// one is visited first (StrictPriority, higher priority).
func TestFailingQueueDoesNotStopTheOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.Queues = map[string]int{"broken": 10, "good": 1}
	cfg.StrictPriority = true
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[goodArgs](func(context.Context, *jobs.Job[goodArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	// every claim of queue broken fails (WRONGTYPE)
	if err := e.rdb.Set(ctx, e.ns+":{broken}:pending", "not an index", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res := e.enqueue(goodArgs{}, jobs.Queue("good"))
	e.start(p)
	jobstest.WaitStateWithin(t, e.ledger, res.Partition, res.JobID, jobs.Succeeded, time.Minute)
}
