package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// In durable mode an operator's action waits for the replicas as an
// enqueue does: acknowledged, the replica holds it at once; with
// replication cut, each action (cancel, run now, a re-run, pause, resume,
// schedule removal, a layout change) fails with an error matching
// ErrActionUnknown, never a silent success, and the primary holds what it
// did.
func TestDurableOperatorActionsWaitForReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	cfg := durableConfig(t, f)
	client := jobs.NewClient(f.Client(), cfg)
	onReplica := jobs.NewInspector(f.Replica.Client(), jobs.Config{Namespace: cfg.Namespace})
	onPrimary := client.Inspector()
	q := jobs.DefaultQueue
	enqueue := func() string {
		t.Helper()
		r, err := client.Enqueue(ctx, countArgs{N: 1}, jobs.Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return r.JobID
	}
	stateOn := func(in *jobs.Inspector, id string) jobs.State {
		t.Helper()
		rec, err := in.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.State
	}

	// Healthy: acknowledged means on the replica, with no wait of the test's.
	a, rerun := enqueue(), enqueue()
	if _, err := client.Cancel(ctx, q, a, "alice", "healthy"); err != nil {
		t.Fatalf("cancel with a healthy replica: %v", err)
	}
	if s := stateOn(onReplica, a); s != jobs.Cancelled {
		t.Fatalf("acknowledged cancel: the replica has the job %s", s)
	}
	if _, err := client.Cancel(ctx, q, rerun, "alice", "to re-run it later"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Pause(ctx, "healthy", "alice", "healthy"); err != nil {
		t.Fatalf("pause with a healthy replica: %v", err)
	}
	if p, err := onReplica.Paused(ctx, "healthy"); err != nil || p == nil {
		t.Fatalf("acknowledged pause not on the replica: %+v, %v", p, err)
	}
	l := ledger.New(f.Client(), ledger.Config{Namespace: cfg.Namespace})
	if _, err := l.RegisterSchedule(ctx, 1, jobs.ScheduleSpec{ID: "nightly", Schedule: "@every 1h0m0s", Kind: "count", Queue: q}); err != nil {
		t.Fatal(err)
	}
	f.Sync()

	f.CutReplication()
	b, c := enqueueOnPrimary(ctx, t, client), enqueueOnPrimary(ctx, t, client)
	unknown := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, jobs.ErrActionUnknown) {
			t.Fatalf("%s with replication cut: %v, want an error matching ErrActionUnknown", what, err)
		}
	}
	_, err := client.Cancel(ctx, q, b, "alice", "cut")
	unknown("cancel", err)
	_, err = client.RunNow(ctx, q, c, "alice", "cut")
	unknown("run now", err)
	_, err = client.Resolve(ctx, q, rerun, jobs.DecideRerun, "alice", "cut")
	unknown("re-run", err)
	_, err = client.Pause(ctx, q, "alice", "cut")
	unknown("pause", err)
	_, err = client.Resume(ctx, "healthy", "alice", "cut")
	unknown("resume", err)
	_, err = client.SetPartitions(ctx, "parted", 2, "alice", "cut")
	unknown("set partitions", err)
	removed, err := client.RemoveSchedule(ctx, "nightly", "alice", "cut")
	unknown("remove schedule", err)
	if !removed {
		t.Fatal("remove schedule with replication cut: not reported removed, though it applied on the primary")
	}
	if removed, err := client.RemoveSchedule(ctx, "nightly", "alice", "again"); removed || err != nil {
		t.Fatalf("removing a removed schedule: %v, %v; want nothing found, nothing written", removed, err)
	}

	// The actions applied on the primary: only the replicas' word is missing.
	if s := stateOn(onPrimary, b); s != jobs.Cancelled {
		t.Fatalf("cancel unacknowledged: the primary has the job %s, want cancelled", s)
	}
	if s := stateOn(onPrimary, rerun); s != jobs.Pending {
		t.Fatalf("re-run unacknowledged: the primary has the job %s, want pending", s)
	}
	if p, err := onPrimary.Paused(ctx, q); err != nil || p == nil {
		t.Fatalf("pause unacknowledged: not on the primary: %+v, %v", p, err)
	}
	if s := stateOn(onReplica, rerun); s != jobs.Cancelled {
		t.Fatalf("the replica, cut, has the re-run job %s, want cancelled still", s)
	}
}

// enqueueOnPrimary enqueues a scheduled job while replication is cut: the
// enqueue fails unacknowledged, and its job is found by its operation id.
func enqueueOnPrimary(ctx context.Context, t *testing.T, client *jobs.Client) string {
	t.Helper()
	op := t.Name() + time.Now().String()
	if _, err := client.Enqueue(ctx, countArgs{N: 2}, jobs.Delay(time.Hour), jobs.OperationID(op)); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	r, err := client.Inspector().FindByOperation(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// A layout change of a paused queue whose writes too few replicas
// acknowledge in durable mode is made whole on the primary (its new
// partitions paused as the queue is, the count changed) and fails with
// ErrActionUnknown; it is not abandoned halfway with its pauses taken back.
// A resume of its partitions likewise reports what it changed there.
func TestDurablePartitionChangeUnacknowledgedIsMadeWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	client := jobs.NewClient(f.Client(), durableConfig(t, f))
	if _, err := client.Pause(ctx, "pq", "alice", "before the change"); err != nil {
		t.Fatal(err)
	}

	f.CutReplication()
	if _, err := client.SetPartitions(ctx, "pq", 2, "alice", "cut"); !errors.Is(err, jobs.ErrActionUnknown) {
		t.Fatalf("set partitions with replication cut: %v, want ErrActionUnknown", err)
	}
	changes, err := client.Inspector().PartitionChanges(ctx, "pq")
	if err != nil || len(changes) != 1 || changes[0].To != 2 {
		t.Fatalf("layout changes on the primary: %+v, %v; want the change to 2 partitions", changes, err)
	}
	for _, n := range ledger.PartitionNames("pq", 2) {
		if p, err := client.Inspector().Paused(ctx, n); err != nil || p == nil {
			t.Fatalf("partition %s on the primary: pause %+v, %v; want paused as its queue was", n, p, err)
		}
	}
	// A resume of its partitions, each unacknowledged, says it changed them.
	if changed, err := client.Resume(ctx, "pq", "alice", "cut"); !changed || !errors.Is(err, jobs.ErrActionUnknown) {
		t.Fatalf("resume with replication cut: changed %v, %v; want true and ErrActionUnknown", changed, err)
	}
	if p, err := client.Inspector().Paused(ctx, "pq"); err != nil || p != nil {
		t.Fatalf("after the resume the primary has the queue paused: %+v, %v", p, err)
	}
}
