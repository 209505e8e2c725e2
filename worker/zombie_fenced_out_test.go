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

type zombieJobArgs struct {
	N int `json:"n"`
}

func (zombieJobArgs) Kind() string { return "zombie-job" }

type zombieAccountArgs struct {
	Account string `json:"account"`
}

func (zombieAccountArgs) Kind() string { return "zombie-account" }

func (a zombieAccountArgs) Resource() string { return "account:" + a.Account }

// zombie is a handler that stalls (a paused process: it neither returns
// nor heeds its context) until resume closes, then writes through the
// store with its attempt's fence and reports the store's answer.
type zombie struct {
	store   *redisfence.Store
	started chan struct{}
	resume  chan struct{}
	wrote   chan error
}

func newZombie(store *redisfence.Store) *zombie {
	return &zombie{store: store, started: make(chan struct{}, 1), resume: make(chan struct{}), wrote: make(chan error, 1)}
}

func (z *zombie) run(ctx context.Context) error {
	z.started <- struct{}{}
	<-z.resume
	f, _ := fence.FromContext(ctx)
	err := z.store.Apply(context.WithoutCancel(ctx), f, redisfence.Set("{"+f.Resource+"}:charged", "1"))
	z.wrote <- err
	return err
}

// TestReconciledAttemptIsFencedOut: an operator cancels a running job
// whose attempt stalls (it ignores its context, as a paused process
// does); its lease expires, and the effect log says the charge was not
// applied, so the job ends cancelled. The stalled attempt then wakes up
// and writes with its own token: the store must refuse it, or the charge
// lands on a job recorded as cancelled (not applied). Both for a job that
// is its own resource (its fence is the ledger's token) and for one
// naming a resource (its fence is the resource lease's token).
func TestReconciledAttemptIsFencedOut(t *testing.T) {
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
			_ = worker.Register(p, jobs.WorkFunc[zombieJobArgs](func(ctx context.Context, _ *jobs.Job[zombieJobArgs]) error { return z.run(ctx) }))
			_ = worker.Register(p, jobs.WorkFunc[zombieAccountArgs](func(ctx context.Context, _ *jobs.Job[zombieAccountArgs]) error { return z.run(ctx) }))
			e.start(p)
			defer func() {
				select {
				case <-z.resume:
				default:
					close(z.resume)
				}
			}()
			var args jobs.JobArgs = zombieJobArgs{N: 1}
			if named {
				args = zombieAccountArgs{Account: "42"}
			}
			// A short handler deadline: renewals stop there, and the stalled
			// attempt's lease expires.
			res := e.enqueue(args, jobs.OperationID("charge-42"), jobs.Timeout(100*time.Millisecond))
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
					t.Fatalf("the stalled attempt's write after its job was found not applied and cancelled: %v, want fence.ErrStale", err)
				}
			case <-time.After(testsignal.DefaultTimeout):
				t.Fatal("the stalled attempt never wrote")
			}
			if eff, ok, err := store.Applied(ctx, "charge-42"); err != nil || ok {
				t.Fatalf("effect log: %+v, applied %v (%v), want not applied", eff, ok, err)
			}
		})
	}
}
