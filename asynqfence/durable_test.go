package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// In durable mode a delivery whose claim too few replicas acknowledged does
// not run, and its job is put back, its attempt not consumed, as a pool
// puts back such a claim: it is not left running under a lease no handler
// holds, which would refuse every delivery as busy until the lease expires
// and then make the job uncertain, to be reconciled (or reviewed) though
// it never ran. Once replication heals, the next delivery runs it, once.
func TestDurableDeliveryNotAcknowledgedIsPutBack(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}
	// A lease far longer than the test: a claim left running would keep
	// the job busy throughout.
	b, err := asynqfence.New(rdb, cfg, asynqfence.Options{WorkerID: "in-process", LeaseTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("invoice", func(context.Context, *asynq.Task) error {
		runs.Add(1)
		return nil
	})
	f.CutReplication()
	conf := testServerConfig()
	// The failed delivery waits for the test to run its task again: the job
	// is read between deliveries, not during one.
	conf.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return time.Hour }
	srv := asynq.NewServerFromRedisClient(rdb, conf)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("invoice", []byte(`{"n":1}`)), asynq.TaskID("i1"), asynq.MaxRetry(1000)); err != nil {
		t.Fatal(err)
	}
	if err := returned.WaitOrTimeout(); !errors.Is(err, asynqfence.ErrNotClaimed) {
		t.Fatalf("delivery with replication cut returned %v, want ErrNotClaimed", err)
	}
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	if rec, err := lg.Get(ctx, "default", "i1"); err != nil || rec.State != jobs.Pending || rec.Attempts != 0 {
		t.Fatalf("job after an unacknowledged claim: %+v, %v; want pending, no attempt consumed", rec, err)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times on unacknowledged claims", n)
	}

	f.HealReplication()
	f.Sync()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	redistest.Await(t, rdb, "asynq:{default}:", "asynq task i1 retry", func() bool {
		info, err := insp.GetTaskInfo("default", "i1")
		return err == nil && info.State == asynq.TaskStateRetry
	})
	if err := insp.RunTask("default", "i1"); err != nil {
		t.Fatal(err)
	}
	if err := returned.WaitOrTimeout(); err != nil {
		t.Fatalf("delivery after replication healed returned %v, want the job run", err)
	}
	rec := jobstest.WaitState(t, lg, "default", "i1", jobs.Succeeded)
	if n := runs.Load(); n != 1 || rec.Attempts != 1 {
		t.Fatalf("handler ran %d times, job took %d attempts; want once, one attempt", n, rec.Attempts)
	}
}

// In durable mode a delivery's outcome too few replicas acknowledged is
// committed again until they do, as a pool's completer does: the delivery
// reports the job's success to asynq once the replica holds it, instead of
// failing a task whose job succeeded (asynq would spend a retry on it, or
// archive it as failed).
func TestDurableDeliveryCompletionIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}
	b, err := asynqfence.New(rdb, cfg, asynqfence.Options{WorkerID: "in-process", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var started testsignal.Signal[struct{}]
	started.Init(t, "handler started")
	release := make(chan struct{})
	var runs atomic.Int32
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("invoice", func(context.Context, *asynq.Task) error {
		runs.Add(1)
		started.Signal(struct{}{})
		<-release
		return nil
	})
	conf := testServerConfig()
	conf.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return time.Hour }
	srv := asynq.NewServerFromRedisClient(rdb, conf)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("invoice", []byte(`{"n":1}`)), asynq.TaskID("i1"), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	started.WaitOrTimeout()
	f.CutReplication()
	close(release)
	// The first commit applies on the primary, unacknowledged.
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	jobstest.WaitState(t, lg, "default", "i1", jobs.Succeeded)
	onReplica := ledger.New(f.Replica.Client(), ledger.Config{Namespace: ns})
	if rec, err := onReplica.Get(ctx, "default", "i1"); err != nil || rec.State != jobs.Running {
		t.Fatalf("replica's record while cut: %+v, %v; want running", rec, err)
	}
	f.HealReplication()
	if err := returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the succeeded delivery returned %v to asynq once the replica held its outcome, want nil", err)
	}
	if rec, err := onReplica.Get(ctx, "default", "i1"); err != nil || rec.State != jobs.Succeeded {
		t.Fatalf("replica's record after the delivery returned: %+v, %v; want succeeded", rec, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}
