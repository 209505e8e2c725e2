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

// TestOperatorDecisionFencesOutTheAttempt: an attempt stalls (it ignores
// its context, as a paused process does) and its lease expires; with no
// effect log on the pool the job goes to review, and an operator decides
// its operation was not applied: gives it up (dead) or re-runs it (its
// queue paused, so the re-run has not started). The stalled attempt then
// wakes up and writes with its own token: the store the operator's client
// fences with must refuse it, or the charge lands on a job recorded as not
// applied. Both for a job that is its own resource and for one naming a
// resource.
func TestOperatorDecisionFencesOutTheAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		named    bool
		decision jobs.Decision
	}{
		{"job resource, dead", false, jobs.DecideDead},
		{"named resource, dead", true, jobs.DecideDead},
		{"job resource, rerun", false, jobs.DecideRerun},
		{"named resource, rerun", true, jobs.DecideRerun},
		{"store down", false, jobs.DecideDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns})
			if err != nil {
				t.Fatal(err)
			}
			var fr fence.Fencer = store
			down := tc.name == "store down"
			if down {
				fr = downFencer{}
			}
			operator := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, Fencer: fr})
			t.Cleanup(func() { _ = operator.Close() })
			p := e.pool(e.config())
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
			if tc.named {
				args = zombieAccountArgs{Account: "42"}
			}
			res := e.enqueue(args, jobs.OperationID("charge-42"), jobs.Timeout(100*time.Millisecond))
			select {
			case <-z.started:
			case <-time.After(testsignal.DefaultTimeout):
				t.Fatal("the handler never started")
			}
			jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Review)
			if _, err := operator.Pause(ctx, jobs.DefaultQueue, "alice", "hold the re-run"); err != nil {
				t.Fatal(err)
			}
			rec, err := operator.Resolve(ctx, jobs.DefaultQueue, res.JobID, tc.decision, "alice", "the gateway has no such charge")
			if down {
				if !errors.Is(err, jobs.ErrNotFencedOut) || !errors.Is(err, errStoreDown) {
					t.Fatalf("a decision whose fence-out failed: %v, want jobs.ErrNotFencedOut wrapping the store's error", err)
				}
				if got, err := e.ledger.Get(ctx, jobs.DefaultQueue, res.JobID); err != nil || got.State != jobs.Review {
					t.Fatalf("job after a decision whose fence-out failed: %+v (%v), want still in review", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			close(z.resume)
			select {
			case err := <-z.wrote:
				if !errors.Is(err, fence.ErrStale) {
					t.Fatalf("the stalled attempt's write after an operator decided %s (job %s): %v, want fence.ErrStale", tc.decision, rec.State, err)
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

var errStoreDown = errors.New("store down")

// downFencer is a store that cannot be reached.
type downFencer struct{}

func (downFencer) FenceOnAcquire(context.Context, fence.Fence) error { return errStoreDown }
