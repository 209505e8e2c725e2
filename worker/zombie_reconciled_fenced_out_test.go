package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type zombieRefundArgs struct {
	N int `json:"n"`
}

func (zombieRefundArgs) Kind() string { return "zombie-refund" }

type zombieTransferArgs struct {
	Account string `json:"account"`
}

func (zombieTransferArgs) Kind() string { return "zombie-transfer" }

func (a zombieTransferArgs) Resource() string { return "account:" + a.Account }

// zombieReconciler is a kind with its own Reconcile, which reads the
// store the handler writes through (the zombie's).
type zombieReconciler[A jobs.JobArgs] struct{ z *zombie }

func (w zombieReconciler[A]) Work(ctx context.Context, _ *jobs.Job[A]) error { return w.z.run(ctx) }

func (w zombieReconciler[A]) Reconcile(ctx context.Context, j *jobs.Job[A]) (jobs.Verdict, error) {
	_, ok, err := w.z.store.Applied(ctx, j.OperationID)
	switch {
	case err != nil:
		return jobs.CannotTell, err
	case ok:
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}

// TestReconcileVerdictFencesOutTheAttempt: as TestReconciledAttemptIsFencedOut,
// for a kind with its own Reconcile, which the resolver asks instead of
// the effect log: its "not applied" ends the cancelled job cancelled, and
// the stalled attempt that wakes up afterwards must be refused by the
// effect log's store, or its charge lands on a job recorded as not
// applied.
func TestReconcileVerdictFencesOutTheAttempt(t *testing.T) {
	for _, named := range []bool{false, true} {
		name := "job resource"
		if named {
			name = "named resource"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns})
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.config()
			cfg.Maintenance.EffectLog = store
			p := e.pool(cfg)
			z := newZombie(store)
			_ = worker.Register(p, zombieReconciler[zombieRefundArgs]{z})
			_ = worker.Register(p, zombieReconciler[zombieTransferArgs]{z})
			e.start(p)
			defer func() {
				select {
				case <-z.resume:
				default:
					close(z.resume)
				}
			}()
			var args jobs.JobArgs = zombieRefundArgs{N: 1}
			if named {
				args = zombieTransferArgs{Account: "42"}
			}
			res := e.enqueue(args, jobs.OperationID("refund-42"), jobs.Timeout(100*time.Millisecond))
			select {
			case <-z.started:
			case <-time.After(testsignal.DefaultTimeout):
				t.Fatal("the handler never started")
			}
			if _, err := e.client.Cancel(ctx, jobs.DefaultQueue, res.JobID, "alice", "customer withdrew"); err != nil {
				t.Fatal(err)
			}
			jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Cancelled)
			close(z.resume)
			select {
			case err := <-z.wrote:
				if !errors.Is(err, fence.ErrStale) {
					t.Fatalf("the stalled attempt's write after Reconcile found it not applied and its job ended cancelled: %v, want fence.ErrStale", err)
				}
			case <-time.After(testsignal.DefaultTimeout):
				t.Fatal("the stalled attempt never wrote")
			}
			if eff, ok, err := store.Applied(ctx, "refund-42"); err != nil || ok {
				t.Fatalf("effect log: %+v, applied %v (%v), want not applied", eff, ok, err)
			}
		})
	}
}
