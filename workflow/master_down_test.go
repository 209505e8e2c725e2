package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowViewsWithAQueuesMasterDown: with the master of another
// queue than a workflow's (and not the registry's) killed, the workflow is
// still read by its id (Get) and listed (List, with a *PartialError naming
// the queue not read); an id found in no queue read is that error, not
// ErrNotFound.
func TestWorkflowViewsWithAQueuesMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	for _, n := range cl.Nodes {
		if err := n.Client().ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	master := func(key string) string {
		t.Helper()
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	// The registry on one master, the workflow's queue on it or another,
	// the lost queue on a third.
	ns := redistest.Namespace(t)
	home := master(ns + ":queues")
	var live, lost string
	for i := 0; (live == "" || lost == "") && i < 1000; i++ {
		q := fmt.Sprintf("wfq%d", i)
		switch m := master(ns + ":{" + q + "}:pending"); {
		case m == home && live == "":
			live = q
		case m != home && lost == "":
			lost = q
		}
	}
	if live == "" || lost == "" {
		t.Fatal("no layout to test")
	}
	e := newEnvOn(t, rdb, ns)
	if _, err := workflow.Enqueue(ctx, e.client, workflow.New("other").Add("a", step("a"), workflow.Options(jobs.Queue(lost)))); err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").Add("a", step("a"), workflow.Options(jobs.Queue(live))))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		if n.Addr == master(ns+":{"+lost+"}:pending") {
			n.Kill()
		}
	}
	if st, err := workflow.Get(ctx, e.client, res.ID); err != nil || st.ID != res.ID {
		t.Fatalf("Get with another queue's master down = %+v, %v", st, err)
	}
	partial := func(what string, err error) {
		t.Helper()
		var pe *jobs.PartialError
		if !errors.As(err, &pe) || errors.Is(err, workflow.ErrNotFound) || len(pe.Unreachable) != 1 || pe.Unreachable[0] != lost {
			t.Fatalf("%s with %s's master down: %v, want a *PartialError naming %s", what, lost, err, lost)
		}
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	partial("List", err)
	if len(list) != 1 || list[0].ID != res.ID {
		t.Fatalf("List with %s's master down = %v, want the workflow of %s", lost, list, live)
	}
	_, err = workflow.Get(ctx, e.client, "wf-no-such-workflow")
	partial("Get of no workflow", err)
}
