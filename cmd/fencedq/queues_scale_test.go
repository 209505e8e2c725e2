package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestQueuesListBoundedOverManyQueues: fencedq queues over 1 000 queues
// costs a fixed number of round trips, not a few per queue, and lists
// every queue with its pause.
func TestQueuesListBoundedOverManyQueues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	const queues = 1000
	registerQueues(t, rdb, ns, queues)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.Pause(ctx, "q7", "alice", "hold"); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	var out bytes.Buffer
	if err := listQueues(ctx, &out, c.Inspector(), "", false); err != nil {
		t.Fatal(err)
	}
	if rt.N() > 12 {
		t.Errorf("queues: %d round trips over %d queues", rt.N(), queues)
	}
	if !strings.Contains(out.String(), "1000 queue(s)") || strings.Count(out.String(), "by operator:alice") != 1 {
		t.Fatalf("queues: %s", out.String())
	}

	// The dashboard command's /metrics scrape reads the same way.
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLedgerCollector(c.Inspector()))
	rt.Reset()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range fams {
		series[f.GetName()] = len(f.GetMetric())
	}
	if rt.N() > 12 || len(fams) != 2 || series["fencedq_ledger_jobs"] != queues*len(jobs.States) || series["fencedq_ledger_unreachable"] != queues {
		t.Errorf("scrape: %d round trips, series %v", rt.N(), series)
	}
}

// registerQueues adds queues q0 … q<n-1> to namespace ns's queue registry,
// as enqueues to them would.
func registerQueues(t *testing.T, rdb redis.UniversalClient, ns string, n int) {
	t.Helper()
	pipe := rdb.Pipeline()
	for i := range n {
		pipe.SAdd(context.Background(), ns+":queues", "q"+strconv.Itoa(i))
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}
