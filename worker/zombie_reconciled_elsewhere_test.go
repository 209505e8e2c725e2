package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// stalledReconciler runs zombie jobs through z and has a Reconcile, which
// the leader of TestLeaderWithoutTheKindsReconcileDecidesNothing lacks.
type stalledReconciler struct{ z *zombie }

func (s stalledReconciler) Work(ctx context.Context, _ *jobs.Job[zombieJobArgs]) error {
	return s.z.run(ctx)
}

func (stalledReconciler) Reconcile(context.Context, *jobs.Job[zombieJobArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// TestLeaderWithoutTheKindsReconcileDecidesNothing: an attempt stalls in
// a pool that has the kind's Reconcile and does not lead, and its lease
// expires; the maintenance leader, which has an effect log but not the
// kind's Reconcile, answers "cannot tell" without fencing, and decides
// nothing the attempt's late write could contradict: the job goes from
// uncertain to review only (never re-run, dead or cancelled), and the
// attempt's write when it wakes is accepted, its effect recorded, so an
// operator finds it applied.
func TestLeaderWithoutTheKindsReconcileDecidesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store, err := redisfence.New(e.rdb, redisfence.Config{Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	lead := e.config()
	lead.Maintenance.EffectLog = store
	lead.Maintenance.MaxReconcileTries = 2
	lead.Queues = map[string]int{"elsewhere": 1} // runs no job of the test's queue
	e.start(e.pool(lead))

	runs := e.config()
	runs.Maintenance.Disabled = true
	runs.Registerer = nil
	p := e.pool(runs)
	z := newZombie(store)
	if err := worker.Register[zombieJobArgs](p, stalledReconciler{z: z}); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	defer func() {
		select {
		case <-z.resume:
		default:
			close(z.resume)
		}
	}()
	res := e.enqueue(zombieJobArgs{N: 1}, jobs.OperationID("charge-7"), jobs.Timeout(100*time.Millisecond))
	select {
	case <-z.started:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler never started")
	}
	rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, res.JobID, jobs.Review)
	hist, err := e.client.Inspector().History(ctx, jobs.DefaultQueue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	asked := false
	for _, ev := range hist {
		asked = asked || strings.Contains(ev.Note, "has no Reconcile for the kind")
		if ev.Decision != "" && ev.Decision != string(jobs.DecideLater) && ev.Decision != string(jobs.DecideReview) {
			t.Fatalf("the leader decided %s on a kind it cannot reconcile (history %+v)", ev.Decision, hist)
		}
	}
	if !asked {
		t.Fatalf("no look by the leader says it has no Reconcile for the kind (history %+v)", hist)
	}
	close(z.resume)
	select {
	case err := <-z.wrote:
		if err != nil {
			t.Fatalf("the stalled attempt's write, nothing decided about it: %v, want accepted", err)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the stalled attempt never wrote")
	}
	if eff, ok, err := store.Applied(ctx, "charge-7"); err != nil || !ok || eff.Token != rec.Token {
		t.Fatalf("effect log: %+v, applied %v (%v), want applied with the attempt's token %d", eff, ok, err, rec.Token)
	}
}
