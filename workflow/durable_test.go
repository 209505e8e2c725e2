package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// In durable mode a workflow is acknowledged only once the replica holds
// it. With replication cut, its enqueue fails with ErrEnqueueUnknown, and
// so does every retry with the same operation id (the workflow is on the
// primary only): a retry that finds it written says so only once the
// replica holds it too, and after a failover that lost it, the retry
// writes it once.
func TestDurableWorkflowRetryIsAcknowledgedOnlyOnTheReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	cfg := jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}} // ample on a loaded machine; the cut cases wait it out
	c := jobs.NewClient(f.Client(), cfg)
	onReplica := jobs.NewClient(f.Replica.Client(), jobs.Config{Namespace: cfg.Namespace})

	ok, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("a"))
	if err != nil {
		t.Fatalf("durable workflow with a healthy replica: %v", err)
	}
	if st, err := workflow.Get(ctx, onReplica, ok.ID); err != nil || len(st.Steps) != 4 {
		t.Fatalf("acknowledged workflow not on the replica: %+v, %v", st, err)
	}

	f.CutReplication()
	for i := range 2 {
		res, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("b"))
		if !errors.Is(err, jobs.ErrEnqueueUnknown) {
			t.Fatalf("try %d with replication cut: %+v, %v; want ErrEnqueueUnknown", i+1, res, err)
		}
	}
	f.HealReplication()
	f.Sync()
	b, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("b"))
	if err != nil || !b.Deduplicated {
		t.Fatalf("retry after replication healed: %+v, %v; want the existing workflow, acknowledged", b, err)
	}
	if st, err := workflow.Get(ctx, onReplica, b.ID); err != nil || len(st.Steps) != 4 {
		t.Fatalf("retried workflow not on the replica: %+v, %v", st, err)
	}

	// A workflow the failover lost is written by the retry on the promoted
	// replica: one workflow per operation.
	f.CutReplication()
	if _, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("c")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	f.KillPrimary()
	f.Rejoin()     // durable mode needs a replica on the new primary too
	for range 10 { // the first tries may still meet the old primary's connections
		if _, err = workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("c")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("retry after the failover: %v", err)
	}
	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending] != 3 || counts[jobs.Waiting] != 9 {
		t.Fatalf("counts %v, %v after the failover: want three workflows of 4 steps (a, b, c), each once", counts, err)
	}
}

// A workflow whose enqueue ended unknown and whose retry found it is
// acknowledged by that retry: the client records it, so a later loss of
// the namespace's record brings it back with Resubmit.
func TestDurableRetriedWorkflowIsResubmittedAfterALoss(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	cfg := jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}} // ample on a loaded machine; the cut cases wait it out
	c := jobs.NewClient(rdb, cfg)

	if _, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("kept")); err != nil {
		t.Fatal(err)
	}
	f.CutReplication()
	if _, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("retried")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	f.HealReplication()
	f.Sync()
	retried, err := workflow.Enqueue(ctx, c, diamond(), workflow.OperationID("retried"))
	if err != nil || !retried.Deduplicated {
		t.Fatalf("retry after replication healed: %+v, %v; want the existing workflow, acknowledged", retried, err)
	}

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	if _, err := c.Resubmit(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := workflow.Get(ctx, c, retried.ID); err != nil || len(st.Steps) != 4 {
		t.Fatalf("acknowledged workflow not re-submitted after the loss: %+v, %v", st, err)
	}
	counts, err := c.Inspector().Counts(ctx, jobs.DefaultQueue)
	if err != nil || counts[jobs.Pending] != 2 || counts[jobs.Waiting] != 6 {
		t.Fatalf("counts %v, %v after the re-submission: want two workflows of 4 steps, each once", counts, err)
	}
}

// In durable mode a workflow's cancel waits for the replica like the
// other operator actions: with replication cut it fails with an error
// matching ErrActionUnknown, never a silent success, having cancelled
// every step on the primary; once replication heals, cancelling again
// succeeds (it finds every step cancelled already).
func TestDurableWorkflowCancelUnacknowledgedSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	cfg := jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}
	c := jobs.NewClient(f.Client(), cfg)
	onReplica := jobs.NewClient(f.Replica.Client(), jobs.Config{Namespace: cfg.Namespace})
	res, err := workflow.Enqueue(ctx, c, diamond())
	if err != nil {
		t.Fatal(err)
	}

	f.CutReplication()
	if st, err := workflow.Cancel(ctx, c, res.ID, "alice", "cut"); !errors.Is(err, jobs.ErrActionUnknown) {
		t.Fatalf("cancel with replication cut: %+v, %v; want an error matching ErrActionUnknown", st, err)
	}
	st, err := workflow.Get(ctx, c, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Steps {
		if s.State != jobs.Cancelled {
			t.Fatalf("step %s is %s on the primary after the unacknowledged cancel, want cancelled", s.Name, s.State)
		}
	}

	f.HealReplication()
	f.Sync()
	if _, err := workflow.Cancel(ctx, c, res.ID, "alice", "again"); err != nil {
		t.Fatalf("cancel again with the replica back: %v", err)
	}
	if st, err := workflow.Get(ctx, onReplica, res.ID); err != nil || st.State != workflow.Cancelled {
		t.Fatalf("acknowledged cancel: the replica has %+v, %v", st, err)
	}
}
