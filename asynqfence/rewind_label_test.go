package asynqfence_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// A rewind the bridge finds on a partition of a partitioned queue is
// counted under the queue's name (fencedq_ledger_rewinds_total{queue}), as
// clients and pools count it and as the bridge labels every other series:
// not one series per partition, which alerts and dashboards grouping by
// queue would not add up with the others'.
func TestBridgeCountsARewindUnderTheLogicalQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Registerer: reg}, func(mux *asynq.ServeMux) {
		mux.HandleFunc("order", func(context.Context, *asynq.Task) error { return nil })
	})
	ctx := context.Background()
	client := jobs.NewClient(p.rdb, jobs.Config{Namespace: p.ledger.Namespace()})
	if _, err := client.SetPartitions(ctx, "default", 2, "test", "bridge"); err != nil {
		t.Fatal(err)
	}
	deliver := func(n int) {
		t.Helper()
		op := fmt.Sprintf("order-%d", n)
		task := asynq.NewTaskWithHeaders("order", []byte(`{}`), map[string]string{asynqfence.OperationHeader: op})
		if _, err := p.client.Enqueue(task, asynq.TaskID("t-"+op)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); err != nil {
			t.Fatalf("delivery of %s returned %v", op, err)
		}
	}
	// Jobs on every partition: the bridge's completions saw their write
	// sequences.
	qs, err := p.ledger.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, q := range qs {
		if ledger.IsPartition(q) {
			parts = append(parts, q)
		}
	}
	if len(parts) != 2 {
		t.Fatalf("queues %v: want two partitions", qs)
	}
	for n := 0; ; n++ {
		if n == 50 {
			t.Fatal("50 operations did not reach both partitions")
		}
		deliver(n)
		done := 0
		for _, q := range parts {
			if c, _ := p.rdb.HGet(ctx, p.ledger.StateKey(q, "stats"), "succeeded").Int(); c > 0 {
				done++
			}
		}
		if done == len(parts) {
			break
		}
	}
	// What a promoted replica that missed the last writes holds.
	for _, q := range parts {
		if err := p.rdb.HSet(ctx, p.ledger.StateKey(q, "stats"), "seq", 0, "enqueued", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deliver(1000)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "fencedq_ledger_rewinds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					counted[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(counted) != 1 || counted["default"] != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total by queue: %v; want one rewind, counted under %q", counted, "default")
	}
}
