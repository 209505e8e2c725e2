package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestPeriodicTicksGoOnWithThePartitionedQueuesOwnSlotDown: a schedule
// enqueueing into a partitioned queue goes on ticking, into the partitions
// on masters still up, while the master of the slot of the queue's own
// name (which holds none of its partitions' jobs) is down.
func TestPeriodicTicksGoOnWithThePartitionedQueuesOwnSlotDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	// A namespace whose namespace-wide keys are on other masters than the
	// victim, and a queue whose own name's slot is on the victim.
	var ns, q, victim string
	for i := 0; q == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		var used []string
		for _, k := range []string{":queues", ":partitions", ":pools", ":epoch", ":reconciler:status", ":{periodic}:leader",
			":lease:{" + ledger.LeaderResource + "}"} {
			used = append(used, master(ns+k))
		}
		victim = ""
		for _, n := range cl.Nodes {
			if !slices.Contains(used, n.Addr) {
				victim = n.Addr
			}
		}
		for j := 0; victim != "" && j < 200 && q == ""; j++ {
			if c := fmt.Sprintf("ticks-%d", j); master(ns+":{"+c+"}:pending") == victim {
				q = c
			}
		}
	}
	e := newEnvOn(t, rdb, ns)
	if _, err := e.client.SetPartitions(ctx, q, 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time, 100)
	cfg := e.config()
	cfg.Queues = map[string]int{q: 1}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
		if _, at, ok := jobs.ParsePeriodicOperationID(j.OperationID); ok {
			ticks <- at
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), effectArgs{Name: "tick"}, worker.EnqueueOptions(jobs.Queue(q)))); err != nil {
		t.Fatal(err)
	}
	// Run's error is not checked: a job of a partition on the killed master
	// is left unsettled at shutdown (its commit fails), as documented.
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = p.Run(runCtx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-ticks:
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("no tick ran; pool logs:\n%s", tail(e.logs.String(), 30))
	}
	for _, n := range cl.Nodes {
		if n.Addr == victim {
			n.Kill()
		}
	}
	var killed time.Time
	for _, n := range cl.Nodes {
		if n.Addr != victim {
			tm, err := n.Client().Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			killed = tm
			break
		}
	}
	deadline := time.After(testsignal.Timeout())
	for {
		select {
		case at := <-ticks:
			if at.After(killed) {
				return
			}
		case <-deadline:
			t.Fatalf("no tick after the kill of %s's own slot's master ran; pool logs:\n%s", q, tail(e.logs.String(), 30))
		}
	}
}
