package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// masterDown is a three-master cluster whose namespace registry is on one
// master, queue orders in six partitions, and the master of the first
// partition the registry's master does not hold (victim) killed; job is
// a partition sorting after one of victim's, on another master.
type masterDown struct {
	client *jobs.Client
	names  []string        // orders' partitions
	job    int             // the partition the jobs went to
	lost   map[string]bool // the partitions victim held
	later  *jobs.Result    // a job due in an hour, in names[job]
	withOp *jobs.Result    // another, with operation id op-down-1
}

func startMasterDown(t *testing.T) *masterDown {
	t.Helper()
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	// The namespace's registry lives on one master, home.
	var ns, home string
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		home = master(ns + ":queues")
		if master(ns+":partitions") != home {
			ns = ""
		}
	}
	const q = "orders"
	names := ledger.PartitionNames(q, 6) // sorted: partition order
	at := make([]string, len(names))
	for k, n := range names {
		at[k] = master(ns + ":{" + n + "}:pending")
	}
	// The victim is the master of the first partition home does not hold;
	// the job goes to a later partition that the victim does not hold.
	victim, job := "", -1
	for k := range names {
		switch {
		case victim == "" && at[k] != home:
			victim = at[k]
		case victim != "" && at[k] != victim && job < 0:
			job = k
		}
	}
	if victim == "" || job < 0 {
		t.Fatalf("partitions on %v, registry on %s: no layout to test", at, home)
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("acct-%d", i); ledger.RoutePartition(6, k, "", 0) == job {
			key = k
		}
	}

	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, q, 6, "test", ""); err != nil {
		t.Fatal(err)
	}
	later, err := c.Enqueue(ctx, partArgs{Account: key}, jobs.Queue(q), jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	withOp, err := c.Enqueue(ctx, partArgs{Account: key}, jobs.Queue(q), jobs.OperationID("op-down-1"), jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if later.Partition != names[job] || withOp.Partition != names[job] {
		t.Fatalf("jobs in %s and %s, want %s", later.Partition, withOp.Partition, names[job])
	}
	for _, n := range cl.Nodes {
		if n.Addr == victim {
			n.Kill()
		}
	}
	lost := map[string]bool{}
	for k, n := range names {
		if at[k] == victim {
			lost[n] = true
		}
	}
	return &masterDown{client: c, names: names, job: job, lost: lost, later: later, withOp: withOp}
}

// TestJobLookupsWithAPartitionsMasterDown: with the master of some of a
// partitioned queue's partitions killed (one sorting before the job's),
// the job in a partition another master holds is still found by the
// queue's name, by its id and by its operation id, and the operator
// actions on it apply. A job found nowhere readable is not reported
// missing (it may be on the lost master): the error matches ErrPartial,
// not ErrNotFound.
func TestJobLookupsWithAPartitionsMasterDown(t *testing.T) {
	d := startMasterDown(t)
	ctx := context.Background()
	c, insp, q, names, job, later, withOp := d.client, d.client.Inspector(), "orders", d.names, d.job, d.later, d.withOp
	if r, err := insp.Get(ctx, q, later.JobID); err != nil || r.Queue != names[job] {
		t.Fatalf("Get by the queue's name with a master down = %+v, %v", r, err)
	}
	if h, err := insp.History(ctx, q, later.JobID); err != nil || len(h) == 0 {
		t.Fatalf("History by the queue's name with a master down = %+v, %v", h, err)
	}
	if r, err := insp.Find(ctx, later.JobID); err != nil || r.ID != later.JobID {
		t.Fatalf("Find with a master down = %+v, %v", r, err)
	}
	if r, err := insp.FindByOperationIn(ctx, q, "op-down-1"); err != nil || r.ID != withOp.JobID {
		t.Fatalf("FindByOperationIn with a master down = %+v, %v", r, err)
	}
	if r, err := insp.FindByOperation(ctx, "op-down-1"); err != nil || r.ID != withOp.JobID {
		t.Fatalf("FindByOperation with a master down = %+v, %v", r, err)
	}
	if _, err := c.RunNow(ctx, q, later.JobID, "test", "master down"); err != nil {
		t.Fatalf("RunNow by the queue's name with a master down: %v", err)
	}
	if r, err := c.Cancel(ctx, q, withOp.JobID, "test", "master down"); err != nil || r.State != jobs.Cancelled {
		t.Fatalf("Cancel by the queue's name with a master down = %+v, %v", r, err)
	}

	// Not found where it could be read: it may be on the lost master.
	for what, err := range map[string]error{
		"Get":               func() error { _, err := insp.Get(ctx, q, "no-such-job"); return err }(),
		"Cancel":            func() error { _, err := c.Cancel(ctx, q, "no-such-job", "test", ""); return err }(),
		"Find":              func() error { _, err := insp.Find(ctx, "no-such-job"); return err }(),
		"FindByOperationIn": func() error { _, err := insp.FindByOperationIn(ctx, q, "no-such-op"); return err }(),
		"FindByOperation":   func() error { _, err := insp.FindByOperation(ctx, "no-such-op"); return err }(),
	} {
		var pe *jobs.PartialError
		if !errors.Is(err, jobs.ErrPartial) || errors.Is(err, jobs.ErrNotFound) || !errors.As(err, &pe) || len(pe.Unreachable) == 0 {
			t.Errorf("%s of a job on no readable partition = %v, want ErrPartial naming the partitions not read", what, err)
		}
	}
}

// TestPauseWithAPartitionsMasterDown: with the master of some of a
// partitioned queue's partitions killed (one sorting before others on a
// master still up), Pause pauses every partition it can reach and fails
// with a *PartialError naming the lost ones; Resume and ResumeSeen resume
// every partition they can reach the same way.
func TestPauseWithAPartitionsMasterDown(t *testing.T) {
	d := startMasterDown(t)
	ctx := context.Background()
	c, insp := d.client, d.client.Inspector()
	check := func(what string, changed bool, err error, paused bool) *jobs.Pause {
		t.Helper()
		var pe *jobs.PartialError
		if !changed || !errors.As(err, &pe) || len(pe.Unreachable) != len(d.lost) {
			t.Fatalf("%s with a master down = %v, %v; want a *PartialError naming %v", what, changed, err, d.lost)
		}
		for _, n := range pe.Unreachable {
			if !d.lost[n] {
				t.Fatalf("%s names %s, on a master still up, unreachable", what, n)
			}
		}
		lay, err := insp.Partitions(ctx, "orders")
		if !errors.Is(err, jobs.ErrPartial) {
			t.Fatalf("Partitions with a master down: %v", err)
		}
		var seen *jobs.Pause
		for _, p := range lay.Partitions {
			if d.lost[p.Name] {
				continue
			}
			if (p.Paused != nil) != paused {
				t.Fatalf("after %s, partition %s (on a master still up) has pause %+v", what, p.Name, p.Paused)
			}
			seen = p.Paused
		}
		return seen
	}
	changed, err := c.Pause(ctx, "orders", "test", "incident")
	p := check("Pause", changed, err, true)
	changed, err = c.ResumeSeen(ctx, "orders", p.ID, "test", "incident over")
	check("ResumeSeen", changed, err, false)
	changed, err = c.Pause(ctx, "orders", "test", "again")
	check("Pause", changed, err, true)
	changed, err = c.Resume(ctx, "orders", "test", "")
	check("Resume", changed, err, false)
}

// TestStatsWithAPartitionsMasterDown: with the master of some of a
// partitioned queue's partitions killed, Stats sums the counters of the
// partitions still up (the two jobs enqueued there) and returns them with
// a *PartialError naming exactly the lost partitions.
func TestStatsWithAPartitionsMasterDown(t *testing.T) {
	d := startMasterDown(t)
	st, err := d.client.Inspector().Stats(context.Background(), "orders")
	var pe *jobs.PartialError
	if !errors.As(err, &pe) || len(pe.Unreachable) != len(d.lost) {
		t.Fatalf("Stats with a master down = %v, %v; want a *PartialError naming %v", st, err, d.lost)
	}
	for _, n := range pe.Unreachable {
		if !d.lost[n] {
			t.Fatalf("Stats names %s, on a master still up, unreachable", n)
		}
	}
	if st["enqueued"] != 2 {
		t.Fatalf("Stats with a master down counts %d enqueued, want the 2 on a master still up", st["enqueued"])
	}
}

// TestFlowAndGroupViewsWithAPartitionsMasterDown: with the master of some
// of a partitioned queue's partitions killed, Groups and Limits return what
// the partitions still up hold with a *PartialError naming exactly the
// lost partitions, as every other view of the queue does.
func TestFlowAndGroupViewsWithAPartitionsMasterDown(t *testing.T) {
	d := startMasterDown(t)
	ctx := context.Background()
	insp := d.client.Inspector()
	_, gerr := insp.Groups(ctx, "orders")
	_, lerr := insp.Limits(ctx, "orders")
	for what, err := range map[string]error{"Groups": gerr, "Limits": lerr} {
		var pe *jobs.PartialError
		if !errors.As(err, &pe) || len(pe.Unreachable) != len(d.lost) {
			t.Fatalf("%s with a master down = %v; want a *PartialError naming %v", what, err, d.lost)
		}
		for _, n := range pe.Unreachable {
			if !d.lost[n] {
				t.Fatalf("%s names %s, on a master still up, unreachable", what, n)
			}
		}
	}
}

// TestQueueViewsWithTheRegistrysMasterDown: with the master holding the
// namespace's registry (ns:queues, ns:partitions) killed, the views of a
// queue on a master still up read it under its own name and return what
// they read with a *PartialError naming its partitions (q#*), which could
// not be listed; they do not fail whole.
func TestQueueViewsWithTheRegistrysMasterDown(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	const q = "plain"
	var ns, home string
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		home = master(ns + ":queues")
		if master(ns+":partitions") != home || master(ns+":{"+q+"}:pending") == home {
			ns = ""
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for range 2 {
		if _, err := c.Enqueue(ctx, partArgs{Account: "a"}, jobs.Queue(q), jobs.Delay(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range cl.Nodes {
		if n.Addr == home {
			n.Kill()
		}
	}
	insp := c.Inspector()
	partial := func(what string, err error) {
		t.Helper()
		var pe *jobs.PartialError
		if !errors.As(err, &pe) || len(pe.Unreachable) != 1 || pe.Unreachable[0] != q+"#*" {
			t.Fatalf("%s with the registry's master down: %v, want a *PartialError naming %s#*", what, err, q)
		}
	}
	counts, err := insp.Counts(ctx, q)
	partial("Counts", err)
	if counts[jobs.Pending] != 2 {
		t.Fatalf("Counts with the registry's master down = %v, want the 2 jobs", counts)
	}
	st, err := insp.Stats(ctx, q)
	partial("Stats", err)
	if st["enqueued"] != 2 {
		t.Fatalf("Stats with the registry's master down = %v, want 2 enqueued", st)
	}
	_, err = insp.Events(ctx, q, 10)
	partial("Events", err)
	_, err = insp.Paused(ctx, q)
	partial("Paused", err)
	_, err = insp.DueRunning(ctx, q, time.Now(), 10)
	partial("DueRunning", err)
	_, err = insp.Groups(ctx, q)
	partial("Groups", err)
	_, err = insp.Limits(ctx, q)
	partial("Limits", err)
}
