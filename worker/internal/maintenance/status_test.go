package maintenance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// TestStatusPass: a pass sets the job gauges of every queue from the
// ledger's indexes, records the queues' history for the minute, and
// publishes the leader's status (its name, token, last scan, and what
// this process's expirer and resolver decided).
func TestStatusPass(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	f.enqueue("work")
	f.enqueue("work")
	f.claim(jobs.DefaultQueue, time.Hour)
	f.enqueue("work", jobs.Queue("other"))
	l.status.tally.expired.Store(4)
	l.status.tally.resolved.Store(3)
	before := time.Now()

	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		queue string
		state jobs.State
		want  float64
	}{
		{jobs.DefaultQueue, jobs.Pending, 1}, {jobs.DefaultQueue, jobs.Running, 1}, {jobs.DefaultQueue, jobs.Uncertain, 0},
		{"other", jobs.Pending, 1}, {"other", jobs.Running, 0},
	} {
		if v := testutil.ToFloat64(f.metrics.Jobs.WithLabelValues(g.queue, string(g.state))); v != g.want {
			t.Errorf("fencedq_jobs{queue=%q,state=%q} = %v, want %v", g.queue, g.state, v, g.want)
		}
	}
	st, err := f.ledger.LeaderStatus(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil || st.Leader != "pool-a" || st.Token != leader || st.Expired != 4 || st.Resolved != 3 || st.LastScan.IsZero() {
		t.Fatalf("published status %+v", st)
	}
	if scan := testutil.ToFloat64(f.metrics.LastScan); scan < float64(before.Unix()) {
		t.Fatalf("last scan gauge %v, before the pass %d", scan, before.Unix())
	}
	for _, q := range []string{jobs.DefaultQueue, "other"} {
		series, err := f.ledger.Series(f.ctx, q, st.LastScan.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 1 || series[0].Counts[jobs.Pending] != 1 {
			t.Fatalf("queue %s's history: %+v, want this minute's bucket", q, series)
		}
	}
}

// TestStatusQueueFailure: a queue whose indexes cannot be read is logged
// and counted; the other queues' gauges are still set and the status is
// still published.
func TestStatusQueueFailure(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	f.enqueue("work")
	f.enqueue("work", jobs.Queue("broken"))
	if err := f.rdb.Set(f.ctx, f.ledger.StateKey("broken", jobs.Review), "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.status.runOnce(f.ctx, f.lead("pool-a")); err != nil {
		t.Fatalf("one broken queue failed the pass: %v", err)
	}
	if v := testutil.ToFloat64(f.metrics.Jobs.WithLabelValues(jobs.DefaultQueue, string(jobs.Pending))); v != 1 {
		t.Fatalf("the healthy queue's pending gauge is %v", v)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceStatus)); v != 1 {
		t.Fatalf("status errors %v, want 1", v)
	}
	if !f.logged("maintenance pass failed on one queue", `"service":"status"`, `"queue":"broken"`) {
		t.Fatal("the broken queue was not logged")
	}
	if st, err := f.ledger.LeaderStatus(f.ctx); err != nil || st == nil || st.Leader != "pool-a" {
		t.Fatalf("status not published: %+v, %v", st, err)
	}
}

// TestFormerLeaderExportsNoCounts: when leadership ends, the gauges only
// the leader sets (jobs per state, per partition, fair groups per queue)
// are dropped, so a former leader exports no stale counts beside the new
// leader's (a sum over pools would count every queue twice).
func TestFormerLeaderExportsNoCounts(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	f.enqueue("work", jobs.Group("acme"))
	f.enqueue("work", jobs.Group("acme"))
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(f.metrics.Groups.WithLabelValues(jobs.DefaultQueue)); v != 1 {
		t.Fatalf("fencedq_groups = %v while leading, want 1", v)
	}
	ended, cancel := context.WithCancel(f.ctx)
	cancel()
	l.serve(ended, leader) // the leadership's context is over: serve returns
	for name, c := range map[string]prometheus.Collector{
		"fencedq_jobs": f.metrics.Jobs, "fencedq_partition_jobs": f.metrics.PartitionJobs, "fencedq_groups": f.metrics.Groups,
	} {
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("%s: a former leader still exports %d series", name, n)
		}
	}
}

// TestStatusPartitionFailureKeepsTheQueueGauges: a partitioned queue's
// gauges are the sums over its partitions; a pass that cannot read one of
// them leaves the queue's gauges as the last full pass set them, as it
// leaves a plain queue's it cannot read, instead of exporting the sum of
// the partitions it could read.
func TestStatusPartitionFailureKeepsTheQueueGauges(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	if _, err := f.client.SetPartitions(f.ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		f.enqueue("work", jobs.Queue("orders"), jobs.OperationID(fmt.Sprint("op-", i)))
	}
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	pending := f.metrics.Jobs.WithLabelValues("orders", string(jobs.Pending))
	if v := testutil.ToFloat64(pending); v != n {
		t.Fatalf("fencedq_jobs{queue=\"orders\",state=\"pending\"} = %v, want %d", v, n)
	}
	parts := ledger.PartitionNames("orders", 2)
	for _, p := range parts {
		if v := testutil.ToFloat64(f.metrics.PartitionJobs.WithLabelValues("orders", p, string(jobs.Pending))); v == 0 {
			t.Fatalf("partition %s holds no job: the test needs both", p)
		}
	}
	if err := f.rdb.Set(f.ctx, f.ledger.StateKey(parts[0], jobs.Review), "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A key written by hand moves no queue's change mark: the pass that
	// finds it is the next one reading every queue (once a minute).
	l.status.seriesMinute.Store(0)
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatalf("one broken partition failed the pass: %v", err)
	}
	if v := testutil.ToFloat64(pending); v != n {
		t.Fatalf("with partition %s unreadable, fencedq_jobs{queue=\"orders\",state=\"pending\"} = %v, want the last full count %d", parts[0], v, n)
	}
	if !f.logged("maintenance pass failed on one queue", `"service":"status"`, `"queue":"`+parts[0]+`"`) {
		t.Fatal("the broken partition was not logged")
	}
}

// TestStatusPartitionGaugesAfterGoingBackToOnePartition: a queue set back
// to one partition runs on its own name again while its earlier partitions
// drain; the queue's own name keeps its partition gauge up to date beside
// theirs, instead of the count it had when it was last one partition among
// several.
func TestStatusPartitionGaugesAfterGoingBackToOnePartition(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	f.enqueue("work", jobs.Queue("orders"))
	if _, err := f.client.SetPartitions(f.ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	own := f.metrics.PartitionJobs.WithLabelValues("orders", "orders", string(jobs.Pending))
	if v := testutil.ToFloat64(own); v != 1 {
		t.Fatalf("fencedq_partition_jobs{partition=\"orders\",state=\"pending\"} = %v while partitioned, want 1", v)
	}
	if _, err := f.client.SetPartitions(f.ctx, "orders", 1, "test", ""); err != nil {
		t.Fatal(err)
	}
	f.enqueue("work", jobs.Queue("orders"))
	f.enqueue("work", jobs.Queue("orders"))
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(own); v != 3 {
		t.Fatalf("fencedq_partition_jobs{partition=\"orders\",state=\"pending\"} = %v back on one partition, want 3", v)
	}
}
