package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestPoolServesLiveMastersWithTheRegistrysMasterDown: on a cluster whose
// master holding the namespace's registry (ns:queues, ns:partitions) is
// killed, a running pool goes on claiming and completing the jobs of its
// queue on a master still up, enqueued after the kill by a client that
// read the queue's partitions before it; the jobs are found by the queue's
// name (Get), and a job found nowhere is not reported missing (it may be in
// a partition the registry would name): the error matches ErrPartial, not
// ErrNotFound.
func TestPoolServesLiveMastersWithTheRegistrysMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	const q = "live"
	var ns, home string
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		home = master(ns + ":queues")
		if master(ns+":partitions") != home || master(ns+":{"+q+"}:pending") == home {
			ns = ""
		}
	}
	e := newEnvOn(t, rdb, ns)
	done := make(chan string, 4)
	cfg := e.config()
	cfg.Queues = map[string]int{q: 1}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[effectArgs](func(_ context.Context, j *jobs.Job[effectArgs]) error {
		done <- j.Args.Name
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	wait := func(name string) {
		t.Helper()
		select {
		case got := <-done:
			if got != name {
				t.Fatalf("ran %s, want %s", got, name)
			}
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("job %s did not run; pool logs:\n%s", name, tail(e.logs.String(), 30))
		}
	}
	first := e.enqueue(effectArgs{Name: "before"}, jobs.Queue(q))
	wait("before")
	for _, n := range cl.Nodes {
		if n.Addr == home {
			n.Kill()
		}
	}
	after := e.enqueue(effectArgs{Name: "after"}, jobs.Queue(q))
	wait("after")
	insp := e.client.Inspector()
	for _, id := range []string{first.JobID, after.JobID} {
		deadline := time.Now().Add(testsignal.Timeout())
		for {
			r, err := insp.Get(ctx, q, id)
			if err == nil && r.State == jobs.Succeeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s with the registry's master down: %+v, %v", id, r, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_, err := insp.Get(ctx, q, "no-such-job")
	var pe *jobs.PartialError
	if !errors.As(err, &pe) || errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Get of no job with the registry's master down = %v, want a *PartialError", err)
	}
}
