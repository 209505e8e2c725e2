package asynqfence_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestFailoverRewindToAnOrphanedAttemptIsReconciled: a Redis failover to a
// replica cut off mid-way rewinds both asynq and the ledger to attempt 1 of
// a job (running, its task active in asynq), while attempt 2, which the
// lost writes had started, still runs and applies the effect. Its outcome
// is refused (the ledger knows only attempt 1), yet the bridge must not let
// asynq finish the task: no process runs attempt 1 any more, and nothing
// else would ever deliver the job. The task's next delivery finds attempt
// 1's lease passed, reconciles (applied) and the job succeeds: the effect
// happened once, and the job is final.
func TestFailoverRewindToAnOrphanedAttemptIsReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	cfg := jobs.Config{Namespace: ns, Sentinel: f.ClientOptions()}

	var mu sync.Mutex
	applied := map[string]int{} // the effects, by operation id: the test's storage
	b, err := asynqfence.New(rdb, cfg, asynqfence.Options{
		WorkerID: "in-process", LeaseTTL: time.Second,
		Reconcile: func(string) asynqfence.ReconcileFunc {
			return func(_ context.Context, rec *jobs.Record) (jobs.Verdict, error) {
				mu.Lock()
				defer mu.Unlock()
				if applied[rec.OperationID] > 0 {
					return jobs.Applied, nil
				}
				return jobs.NotApplied, nil
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var started testsignal.Signal[fence.Fence]
	started.Init(t, "attempt started")
	gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var runs int
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("pay", func(ctx context.Context, _ *asynq.Task) error {
		fc, _ := fence.FromContext(ctx)
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		started.Signal(fc)
		if n > 2 {
			return errors.New("the handler ran a third time")
		}
		<-gates[n-1]
		if n == 1 {
			return errors.New("the bank was unavailable") // a retry, nothing applied
		}
		mu.Lock()
		applied[fc.OperationID]++
		mu.Unlock()
		return nil
	})
	conf := testServerConfig()
	conf.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return 200 * time.Millisecond }
	srv := asynq.NewServerFromRedisClient(rdb, conf)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("pay", []byte(`{"cents":7}`)), asynq.TaskID("p1"), asynq.MaxRetry(20)); err != nil {
		t.Fatal(err)
	}

	started.WaitOrTimeout() // attempt 1 runs: the replica holds it
	f.Sync()
	f.CutReplication()
	close(gates[0])
	if err := returned.WaitOrTimeout(); err == nil {
		t.Fatal("attempt 1's failure returned nil to asynq")
	}
	started.WaitOrTimeout() // attempt 2, on the primary only
	f.KillPrimary()

	// The promoted replica has attempt 1 running and the task active.
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	if rec, err := lg.Get(ctx, "default", "p1"); err != nil || rec.State != jobs.Running || rec.Attempts != 1 {
		t.Fatalf("after the failover: %+v, %v; want attempt 1 running", rec, err)
	}
	close(gates[1]) // attempt 2 applies the effect; the ledger refuses its outcome
	if err := returned.WaitOrTimeout(); !errors.Is(err, asynqfence.ErrSuperseded) {
		t.Fatalf("attempt 2's refused outcome returned %v to asynq, want ErrSuperseded (asynq keeps the task)", err)
	}
	rec := jobstest.WaitState(t, lg, "default", "p1", jobs.Succeeded)
	mu.Lock()
	defer mu.Unlock()
	if applied["p1"] != 1 || runs != 2 {
		t.Fatalf("effect applied %d times, handler ran %d times; want 1 and 2", applied["p1"], runs)
	}
	hist, err := lg.History(ctx, "default", "p1")
	if err != nil {
		t.Fatal(err)
	}
	if h := jobstest.History(hist); rec.Attempts != 1 || !strings.Contains(h, "lease expired without commit") || !strings.Contains(h, "Reconcile answered applied") {
		t.Fatalf("record %+v, history %s", rec, h)
	}
}
