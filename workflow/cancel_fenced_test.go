package workflow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// chargeStep is a step whose handler stalls (it ignores its context, as a
// paused process does) until the test wakes it, then writes its charge
// through the store with its attempt's fence.
type chargeStep struct {
	N int `json:"n"`
}

func (chargeStep) Kind() string { return "wf_charge" }

// stalled is chargeStep's handler and what the test sees of it.
type stalled struct {
	store   *redisfence.Store
	started chan struct{}
	resume  chan struct{}
	wake    sync.Once
	wrote   chan error
}

func newStalled(store *redisfence.Store) *stalled {
	return &stalled{store: store, started: make(chan struct{}, 1), resume: make(chan struct{}), wrote: make(chan error, 1)}
}

func (s *stalled) Work(ctx context.Context, _ *jobs.Job[chargeStep]) error {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-s.resume
	f, _ := fence.FromContext(ctx)
	err := s.store.Apply(context.WithoutCancel(ctx), f, redisfence.Set("{"+f.Resource+"}:charged", "1"))
	select {
	case s.wrote <- err:
	default:
	}
	return err
}

func (s *stalled) release() { s.wake.Do(func() { close(s.resume) }) }

// TestCancelledWorkflowsStalledStepIsFencedOut: a workflow is cancelled
// while its charge step runs, and that step's attempt stalls; its lease
// expires and the step is uncertain. Whoever decides it was not applied
// (the maintenance leader through its effect log, or an operator's
// re-run from a client given the store as Config.Fencer, the step in
// review) cuts the attempt off from the store first: the step ends
// cancelled, the workflow cancelled, and the attempt's write when it wakes
// is refused as stale, so no charge lands on a workflow that says
// cancelled. An operator's client whose store cannot be reached decides
// nothing: the step stays in review and the workflow running.
func TestCancelledWorkflowsStalledStepIsFencedOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		effectLog bool
		down      bool
	}{
		{"reconciled by the effect log", true, false},
		{"operator re-run from review", false, false},
		{"operator re-run, store down", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns})
			if err != nil {
				t.Fatal(err)
			}
			s := newStalled(store)
			t.Cleanup(s.release)
			mc := worker.MaintenanceConfig{Interval: 100 * time.Millisecond, MaxReconcileTries: 3}
			if tc.effectLog {
				mc.EffectLog = store
			}
			p, err := worker.NewPool(e.rdb, worker.Config{
				Jobs: jobs.Config{Namespace: e.ns}, Queues: map[string]int{jobs.DefaultQueue: 1}, Concurrency: 2,
				LeaseTTL: time.Second, HandlerTimeout: 5 * time.Second, ShutdownTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Maintenance: mc,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.Register[chargeStep](p, s); err != nil {
				t.Fatal(err)
			}
			if err := worker.Register(p, jobs.WorkFunc[Step](e.work)); err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- p.Run(pctx) }()
			t.Cleanup(func() { s.release(); cancel(); <-done })

			res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").
				Add("charge", chargeStep{N: 1}, workflow.Options(jobs.Timeout(100*time.Millisecond))).
				Add("ship", step("ship", "charge"), workflow.After("charge")))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.started:
			case <-time.After(testsignal.Timeout()):
				t.Fatal("the charge step never started")
			}
			if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left"); err != nil {
				t.Fatal(err)
			}
			ref := res.Steps["charge"]
			if tc.effectLog {
				e.wait(res, "charge", jobs.Cancelled)
			} else {
				e.wait(res, "charge", jobs.Review)
				var fr fence.Fencer = store
				if tc.down {
					fr = unreachable{}
				}
				op := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, Fencer: fr})
				t.Cleanup(func() { _ = op.Close() })
				_, err := op.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "bob", "the gateway has no such charge")
				if tc.down {
					if !errors.Is(err, jobs.ErrNotFencedOut) || !errors.Is(err, errUnreachable) {
						t.Fatalf("a re-run whose fence-out failed: %v, want jobs.ErrNotFencedOut wrapping the store's error", err)
					}
					if st := e.status(res.ID); st.State != workflow.Running || e.stepState(res, "charge") != jobs.Review {
						t.Fatalf("after a re-run whose fence-out failed: workflow %s, charge %s; want running, review", st.State, e.stepState(res, "charge"))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if st := e.status(res.ID); st.State != workflow.Cancelled {
				t.Fatalf("workflow %s (%+v), want cancelled", st.State, st.Steps)
			}
			s.release()
			select {
			case err := <-s.wrote:
				if !errors.Is(err, fence.ErrStale) {
					t.Fatalf("the stalled charge's write after its cancelled workflow's step was found not applied: %v, want fence.ErrStale", err)
				}
			case <-time.After(testsignal.Timeout()):
				t.Fatal("the stalled charge never wrote")
			}
			rec, err := e.ledger.Get(ctx, ref.Queue, ref.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if eff, ok, err := store.Applied(ctx, rec.OperationID); err != nil || ok {
				t.Fatalf("effect log: %+v, applied %v (%v), want not applied", eff, ok, err)
			}
			if n := e.runs.count("ship"); n != 0 {
				t.Fatalf("ship ran %d times in a cancelled workflow", n)
			}
		})
	}
}

var errUnreachable = errors.New("store unreachable")

// unreachable is a store that cannot be reached.
type unreachable struct{}

func (unreachable) FenceOnAcquire(context.Context, fence.Fence) error { return errUnreachable }
