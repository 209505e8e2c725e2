package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// clusterEnv is a test env on a fresh three-master cluster.
func clusterEnv(t *testing.T) (*env, *redistest.Cluster) {
	cl := redistest.StartCluster(t)
	return newEnvOn(t, cl.Client(), redistest.Namespace(t)), cl
}

// waitAll waits until every job of rs is in state s (each in its
// partition) and returns their records.
func (e *env) waitAll(rs []*jobs.Result, s jobs.State) []*jobs.Record {
	e.t.Helper()
	out := make([]*jobs.Record, len(rs))
	for i, r := range rs {
		out[i] = jobstest.WaitState(e.t, e.ledger, r.Partition, r.JobID, s)
	}
	return out
}

// TestPartitionedQueueDrainsOnACluster runs two pools on a queue with three
// partitions, one per master of a cluster: every job runs once under a
// fenced claim in its own partition, every partition is claimed from, and
// a change to six partitions sends new jobs to the new layout while the
// old partitions drain.
func TestPartitionedQueueDrainsOnACluster(t *testing.T) {
	e, _ := clusterEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "default", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	old := ledger.PartitionNames("default", 3)
	var rs []*jobs.Result
	for i := range 30 {
		rs = append(rs, e.enqueue(effectArgs{Name: fmt.Sprint(i)}, jobs.OperationID(fmt.Sprintf("op-%d", i))))
	}
	for _, id := range []string{"a", "b"} {
		cfg := e.config()
		cfg.WorkerID = "pool-" + id
		p := e.pool(cfg)
		_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: e.rdb, ns: e.ns}))
		e.start(p)
	}
	recs := e.waitAll(rs, jobs.Succeeded)
	for i, r := range recs {
		if r.Attempts != 1 || r.Token == 0 || r.Owner == "" || !slices.Contains(old, r.Queue) {
			t.Fatalf("job %d: %+v", i, r)
		}
		if n := e.applies(fmt.Sprintf("op-%d", i)); n != "1" {
			t.Fatalf("op-%d applied %s times", i, n)
		}
	}
	// The leader's gauges: the queue as one, each partition's depth.
	gauges := func() (succeeded float64, parts map[string]bool) {
		fams, _ := e.reg.Gather()
		parts = map[string]bool{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				switch {
				case f.GetName() == "fencedq_jobs" && l["queue"] == "default" && l["state"] == "succeeded":
					succeeded = m.GetGauge().GetValue()
				case f.GetName() == "fencedq_jobs" && l["queue"] != "default":
					t.Fatalf("a job-count gauge for %q", l["queue"])
				case f.GetName() == "fencedq_partition_jobs" && l["queue"] == "default" && l["state"] == "pending":
					parts[l["partition"]] = true
				}
			}
		}
		return succeeded, parts
	}
	if err := redistest.Wait(e.rdb, e.ns, 10*time.Second, func() bool {
		n, parts := gauges()
		return n == 30 && len(parts) == 3
	}); err != nil {
		n, parts := gauges()
		t.Fatalf("gauges: succeeded %v, partitions %v: %v", n, parts, err)
	}
	for _, n := range old {
		st, _ := e.ledger.Stats(ctx, n)
		// A claim that lapsed before its handler started (a loaded machine)
		// is put back: counted attempted and deferred, not run.
		if st["attempted"] == 0 || st["succeeded"] != st["attempted"]-st["deferred"] {
			t.Fatalf("partition %s: %v", n, st)
		}
	}

	// Six partitions: new jobs go to the new layout (while the pools run),
	// and the jobs of the old one still finish.
	if prev, err := e.client.SetPartitions(ctx, "default", 6, "test", ""); err != nil || prev != 3 {
		t.Fatalf("SetPartitions: %d, %v", prev, err)
	}
	now := ledger.PartitionNames("default", 6)
	rs = rs[:0]
	for i := 30; i < 60; i++ {
		r := e.enqueue(effectArgs{Name: fmt.Sprint(i)}, jobs.OperationID(fmt.Sprintf("op-%d", i)))
		if !slices.Contains(now, r.Partition) {
			t.Fatalf("job %d went to %s, not the new layout %v", i, r.Partition, now)
		}
		rs = append(rs, r)
	}
	e.waitAll(rs, jobs.Succeeded)
	counts, _ := e.client.Inspector().Counts(ctx, "default")
	if counts[jobs.Succeeded] != 60 || counts[jobs.Pending] != 0 {
		t.Fatalf("counts %v", counts)
	}
	lay, _ := e.client.Inspector().Partitions(ctx, "default")
	current := 0
	for _, p := range lay.Partitions {
		if p.Index >= 0 {
			current++
		}
	}
	if lay.Count != 6 || current != 6 || len(lay.Partitions) < 6 {
		t.Fatalf("layout %+v", lay)
	}
}

// TestPartitionedDrainAfterChangingPartitions is the documented procedure
// with no pool running meanwhile: jobs enqueued under three partitions
// stay there when the queue moves to six, new ones go to the six, and a
// pool started afterwards drains both layouts (and the queue's own jobs
// from before it had partitions).
func TestPartitionedDrainAfterChangingPartitions(t *testing.T) {
	e, _ := clusterEnv(t)
	ctx := context.Background()
	var rs []*jobs.Result
	rs = append(rs, e.enqueue(effectArgs{Name: "plain"}, jobs.OperationID("op-plain")))
	if rs[0].Partition != "default" {
		t.Fatalf("a queue without partitions: %+v", rs[0])
	}
	for _, p := range []int{3, 6} {
		if _, err := e.client.SetPartitions(ctx, "default", p, "test", ""); err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			op := fmt.Sprintf("op-%d-%d", p, i)
			r := e.enqueue(effectArgs{Name: op}, jobs.OperationID(op))
			if !slices.Contains(ledger.PartitionNames("default", p), r.Partition) {
				t.Fatalf("P=%d: job in %s", p, r.Partition)
			}
			rs = append(rs, r)
		}
	}
	p := e.pool(e.config())
	_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: e.rdb, ns: e.ns}))
	e.start(p)
	e.waitAll(rs, jobs.Succeeded)
	lay, err := e.client.Inspector().Partitions(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	draining := 0
	for _, part := range lay.Partitions {
		if part.Counts[jobs.Pending]+part.Counts[jobs.Running] != 0 {
			t.Fatalf("partition %s not drained: %v", part.Name, part.Counts)
		}
		if part.Index < 0 {
			draining++
		}
	}
	if draining < 1 { // the queue's own name, and the old layout's names that the new one does not reuse
		t.Fatalf("no earlier layout listed: %+v", lay.Partitions)
	}
}

// TestKilledWorkersPartitionedJobsRecovered SIGKILLs a worker process
// holding jobs of two partitions of a cluster queue: the maintenance
// leader expires each attempt in its partition, reconciles it, and each
// job runs again once with a higher token, its effect applied once.
func TestKilledWorkersPartitionedJobsRecovered(t *testing.T) {
	e, cl := clusterEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "default", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	// Two jobs whose operation ids route them to two partitions.
	var rs []*jobs.Result
	seen := map[string]bool{}
	for i := 0; len(rs) < 2; i++ {
		op := fmt.Sprintf("op-kill-%d", i)
		k := ledger.PartitionNames("default", 3)[ledger.RoutePartition(3, "", op, 0)]
		if seen[k] {
			continue
		}
		seen[k] = true
		rs = append(rs, e.enqueue(effectArgs{Name: op}, jobs.OperationID(op)))
	}
	helper := startHelper(t, "block-before-effect", "", e.ns, "FENCEDQ_CLUSTER="+strings.Join(cl.Addrs(), ","))
	list := e.ns + ":test:started"
	redistest.AwaitWithin(t, e.rdb, list, "the helper's two claims", 30*time.Second, func() bool { return e.rdb.LLen(ctx, list).Val() == 2 })
	first := e.waitAll(rs, jobs.Running)
	_ = helper.Process.Signal(syscall.SIGKILL)
	_, _ = helper.Process.Wait()

	p := e.pool(e.config())
	_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: e.rdb, ns: e.ns}))
	e.start(p)
	for i, r := range e.waitAll(rs, jobs.Succeeded) {
		if r.Attempts != 2 || r.Token <= first[i].Token || r.Queue != rs[i].Partition {
			t.Fatalf("job %d: attempts %d, token %d after %d, in %s", i, r.Attempts, r.Token, first[i].Token, r.Queue)
		}
		if n := e.applies(r.OperationID); n != "1" {
			t.Fatalf("%s applied %s times", r.OperationID, n)
		}
		st, _ := e.ledger.Stats(ctx, r.Queue)
		if st["uncertain"] != 1 {
			t.Fatalf("partition %s: the expired attempt was not made uncertain: %v", r.Queue, st)
		}
	}
}

// TestPartitionedQueueOnSixMasters checks the layout on a six-master
// cluster (P a multiple of the masters: the same number of partitions on
// each; P = 3: three partitions on three masters) and drains a queue of six
// partitions with two pools: every job runs once under a fenced claim in
// its own partition, its effect applied once, and every partition, so
// every master, serves its share.
func TestPartitionedQueueOnSixMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("six masters skipped in -short mode")
	}
	cl := redistest.StartClusterN(t, 6)
	e := newEnvOn(t, cl.Client(), redistest.Namespace(t))
	ctx := context.Background()
	insp := e.client.Inspector()
	for _, tc := range []struct{ p, masters, each int }{{6, 6, 1}, {12, 6, 2}, {3, 3, 1}} {
		q := fmt.Sprintf("spread-%d", tc.p)
		if _, err := e.client.SetPartitions(ctx, q, tc.p, "test", ""); err != nil {
			t.Fatal(err)
		}
		lay, err := insp.Partitions(ctx, q)
		if err != nil || len(lay.Partitions) != tc.p {
			t.Fatalf("P=%d: layout %+v, %v", tc.p, lay, err)
		}
		per := map[string]int{}
		for _, part := range lay.Partitions {
			per[part.Master]++
		}
		if len(per) != tc.masters {
			t.Fatalf("P=%d on %d masters, want %d: %v", tc.p, len(per), tc.masters, per)
		}
		for m, n := range per {
			if n != tc.each {
				t.Fatalf("P=%d: master %s holds %d partitions, want %d: %v", tc.p, m, n, tc.each, per)
			}
		}
	}

	if _, err := e.client.SetPartitions(ctx, "default", 6, "test", ""); err != nil {
		t.Fatal(err)
	}
	names := ledger.PartitionNames("default", 6)
	var rs []*jobs.Result
	for i := range 60 {
		rs = append(rs, e.enqueue(effectArgs{Name: fmt.Sprint(i)}, jobs.OperationID(fmt.Sprintf("op6-%d", i))))
	}
	for _, id := range []string{"a", "b"} {
		cfg := e.config()
		cfg.WorkerID = "pool-" + id
		p := e.pool(cfg)
		_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: e.rdb, ns: e.ns}))
		e.start(p)
	}
	for i, r := range e.waitAll(rs, jobs.Succeeded) {
		if r.Attempts != 1 || r.Token == 0 || r.Owner == "" || r.Queue != rs[i].Partition || !slices.Contains(names, r.Queue) {
			t.Fatalf("job %d: %+v (enqueued to %s)", i, r, rs[i].Partition)
		}
		if n := e.applies(fmt.Sprintf("op6-%d", i)); n != "1" {
			t.Fatalf("op6-%d applied %s times", i, n)
		}
	}
	lay, err := insp.Partitions(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	var total int64
	for _, part := range lay.Partitions {
		if part.Index < 0 {
			continue
		}
		st, _ := e.ledger.Stats(ctx, part.Name)
		if part.Counts[jobs.Succeeded] == 0 || st["succeeded"] != st["attempted"]-st["deferred"] || part.Counts[jobs.Pending] != 0 {
			t.Fatalf("partition %s on %s: counts %v, stats %v", part.Name, part.Master, part.Counts, st)
		}
		masters[part.Master] = true
		total += part.Counts[jobs.Succeeded]
	}
	if len(masters) != 6 || total != 60 {
		t.Fatalf("%d jobs succeeded over %d masters, want 60 over 6", total, len(masters))
	}
}
