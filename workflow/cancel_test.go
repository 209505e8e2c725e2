package workflow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// reconciling is the Step worker with a Reconcile whose verdict the test
// sets (CannotTell until then).
type reconciling struct {
	e       *env
	verdict atomic.Int32
	// read, when set, handles the steps instead of e.work.
	read func(ctx context.Context, j *jobs.Job[Step]) error
}

func (r *reconciling) Work(ctx context.Context, j *jobs.Job[Step]) error {
	if r.read != nil {
		return r.read(ctx, j)
	}
	return r.e.work(ctx, j)
}

func (r *reconciling) Reconcile(context.Context, *jobs.Job[Step]) (jobs.Verdict, error) {
	return jobs.Verdict(r.verdict.Load()), nil
}

// startReconciling runs a pool whose Step worker reconciles with r's
// verdict; maintenance false keeps it out of the leader election (no
// reconciling, no expiry).
func (e *env) startReconciling(r *reconciling, maintenance bool, queues ...string) func() {
	return e.run(maintenance, nil, func(p *worker.Pool) error { return worker.Register[Step](p, r) }, queues...)
}

// stepState reads the state of step of res.
func (e *env) stepState(res *workflow.Result, step string) jobs.State {
	e.t.Helper()
	ref := res.Steps[step]
	r, err := e.ledger.Get(context.Background(), ref.Queue, ref.JobID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.State
}

// uncertainThenCancelled enqueues charge (ending uncertain) → ship, runs
// charge in a pool that does not reconcile, and cancels the workflow
// while charge is uncertain.
func uncertainThenCancelled(t *testing.T, e *env, r *reconciling) *workflow.Result {
	t.Helper()
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("unsure").
		Add("charge", Step{Name: "charge", Unknown: true}).
		Add("ship", step("ship", "charge"), workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.startReconciling(r, false)
	e.wait(res, "charge", jobs.Uncertain)
	stop()
	st, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left")
	if err != nil {
		t.Fatal(err)
	}
	// the uncertain step is not dropped: it stays to be reconciled, and the
	// workflow is not final until it is
	if st.State != workflow.Running || st.Steps[0].State != jobs.Uncertain || st.Steps[1].State != jobs.Cancelled {
		t.Fatalf("after cancel: %s %+v", st.State, st.Steps)
	}
	return res
}

// TestCancelledWorkflowsUncertainStepNotAppliedEndsCancelled: a step that
// was uncertain when its workflow was cancelled is still reconciled; found
// not applied, it ends cancelled instead of running again, and its
// dependent never starts.
func TestCancelledWorkflowsUncertainStepNotAppliedEndsCancelled(t *testing.T) {
	e := newEnv(t)
	r := &reconciling{e: e}
	res := uncertainThenCancelled(t, e, r)
	r.verdict.Store(int32(jobs.NotApplied))
	e.fixed.Store(true) // a re-run would succeed
	e.startReconciling(r, true)
	c := e.wait(res, "charge", jobs.Cancelled)
	if c.Reason == "" {
		t.Error("charge cancelled without a reason")
	}
	e.requireStaysCancelled(t, res, map[string]int{"charge": 1, "ship": 0})
}

// TestCancelledWorkflowsUncertainStepApplied: found applied, the uncertain
// step of a cancelled workflow succeeded (its effect happened), and its
// dependent stays cancelled.
func TestCancelledWorkflowsUncertainStepApplied(t *testing.T) {
	e := newEnv(t)
	r := &reconciling{e: e}
	res := uncertainThenCancelled(t, e, r)
	r.verdict.Store(int32(jobs.Applied))
	e.startReconciling(r, true)
	e.wait(res, "charge", jobs.Succeeded)
	e.wait(res, "ship", jobs.Cancelled)
	if n := e.runs.count("ship"); n != 0 {
		t.Fatalf("ship cancelled, but ran %d times", n)
	}
	if st := e.status(res.ID); st.State != workflow.Cancelled {
		t.Fatalf("workflow %s (%+v)", st.State, st.Steps)
	}
}

// TestOperatorRerunOfACancelledWorkflowsUncertainStep: an operator's
// re-run (its verdict "not applied") of a cancelled workflow's step in
// review or uncertain ends it cancelled, as the reconciler's would.
func TestOperatorRerunOfACancelledWorkflowsUncertainStep(t *testing.T) {
	for _, from := range []jobs.State{jobs.Uncertain, jobs.Review} {
		t.Run(string(from), func(t *testing.T) {
			e := newEnv(t)
			r := &reconciling{e: e}
			ctx := context.Background()
			res, err := workflow.Enqueue(ctx, e.client, workflow.New("unsure").
				Add("charge", Step{Name: "charge", Unknown: true}).
				Add("ship", step("ship", "charge"), workflow.After("charge")))
			if err != nil {
				t.Fatal(err)
			}
			stop := e.startReconciling(r, from == jobs.Review) // CannotTell three times: review
			e.wait(res, "charge", from)
			stop()
			if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left"); err != nil {
				t.Fatal(err)
			}
			e.fixed.Store(true)
			ref := res.Steps["charge"]
			rec, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "bob", "it did not go through")
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != jobs.Cancelled {
				t.Fatalf("charge %s after the re-run of a cancelled workflow's step, want cancelled", rec.State)
			}
			e.startReconciling(r, true)
			e.requireStaysCancelled(t, res, map[string]int{"charge": 1, "ship": 0})
		})
	}
}

// TestRerunOfACancelledWorkflowsFailedStepIsRefused: a step that failed
// (and the steps its failure cancelled) stays so once its workflow was
// cancelled: an operator's re-run of either is refused with ErrWrongState
// and nothing runs.
func TestRerunOfACancelledWorkflowsFailedStepIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("failed").
		Add("charge", Step{Name: "charge", Fail: true}).
		Add("ship", step("ship", "charge"), workflow.After("charge")).
		Add("later", step("later"), workflow.Options(jobs.Delay(time.Hour)))) // keeps it running
	if err != nil {
		t.Fatal(err)
	}
	stop := e.start()
	e.wait(res, "ship", jobs.Cancelled)
	stop()
	if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left"); err != nil {
		t.Fatal(err)
	}
	e.fixed.Store(true)
	for _, s := range []string{"charge", "ship", "later"} {
		ref := res.Steps[s]
		if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "bob", "try again"); !errors.Is(err, jobs.ErrWrongState) {
			t.Fatalf("re-run of %s of a cancelled workflow: %v, want ErrWrongState", s, err)
		}
	}
	e.start()
	e.requireStaysCancelled(t, res, map[string]int{"charge": 1, "ship": 0, "later": 0})
}

// TestCancelAFinishedWorkflowIsRefused: a workflow that failed or
// succeeded is over: Cancel fails with ErrWrongState and leaves it as it
// was (its state, no operator recorded, its failed step still re-runnable).
func TestCancelAFinishedWorkflowIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	failed, err := workflow.Enqueue(ctx, e.client, workflow.New("failed").
		Add("charge", Step{Name: "charge", Fail: true}).
		Add("ship", step("ship", "charge"), workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := workflow.Enqueue(ctx, e.client, diamond())
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(failed, "ship", jobs.Cancelled)
	e.wait(ok, "ship", jobs.Succeeded)
	for _, res := range []*workflow.Result{failed, ok} {
		want := e.status(res.ID).State
		if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "too late"); !errors.Is(err, jobs.ErrWrongState) {
			t.Fatalf("cancel of a %s workflow: %v, want ErrWrongState", want, err)
		}
		if st := e.status(res.ID); st.State != want || st.CancelledBy != "" {
			t.Fatalf("after a refused cancel: %s, cancelled by %q; want %s", st.State, st.CancelledBy, want)
		}
	}
	// the failed one can still be re-run: its failed step runs again
	e.fixed.Store(true)
	ref := failed.Steps["charge"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "bob", "card fixed"); err != nil {
		t.Fatal(err)
	}
	e.wait(failed, "ship", jobs.Succeeded)
}

// TestCancelWithAnInvalidOperatorWritesNothing: Cancel refuses an
// operator name the client refuses (jobs.ErrInvalid) before writing: the
// workflow is not marked cancelled and its steps go on.
func TestCancelWithAnInvalidOperatorWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond())
	if err != nil {
		t.Fatal(err)
	}
	for _, actor := range []string{"", "\x1b]0;pwned\a"} {
		if _, err := workflow.Cancel(ctx, e.client, res.ID, actor, "note"); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("cancel by %q: %v, want ErrInvalid", actor, err)
		}
	}
	if st := e.status(res.ID); st.CancelledBy != "" {
		t.Fatalf("refused cancel recorded: cancelled by %q", st.CancelledBy)
	}
	e.start()
	for s := range res.Steps {
		e.wait(res, s, jobs.Succeeded)
	}
	if st := e.status(res.ID); st.State != workflow.Succeeded {
		t.Fatalf("workflow %s", st.State)
	}
}

// TestFanInWithAnUncertainBranchCancelled: a fan-in whose one branch is
// uncertain when the workflow is cancelled never runs, whatever that
// branch is found to be; the other branch's success does not promote it.
func TestFanInWithAnUncertainBranchCancelled(t *testing.T) {
	e := newEnv(t)
	r := &reconciling{e: e}
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("fan-in").
		Add("a", step("a")).
		Add("b", Step{Name: "b", Deps: []string{"a"}, Unknown: true}, workflow.After("a")).
		Add("c", step("c", "a"), workflow.After("a"), workflow.Options(jobs.Delay(time.Hour))).
		Add("d", step("d", "b", "c"), workflow.After("b", "c"), workflow.AllowFailure("b")))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.startReconciling(r, false)
	e.wait(res, "b", jobs.Uncertain)
	stop()
	if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left"); err != nil {
		t.Fatal(err)
	}
	r.verdict.Store(int32(jobs.NotApplied))
	e.fixed.Store(true)
	e.startReconciling(r, true)
	e.wait(res, "b", jobs.Cancelled)
	e.requireStaysCancelled(t, res, map[string]int{"b": 1, "c": 0, "d": 0})
}

// TestDependencyOutputOfAnExpiredStep: a step whose dependency's job
// expired (its retention passed before the step ran) gets an error
// matching jobs.ErrNoOutput, as documented, not a bare "not found".
func TestDependencyOutputOfAnExpiredStep(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("slow").
		Add("first", step("first")).
		Add("late", step("late", "first"), workflow.After("first"), workflow.Options(jobs.Delay(4*time.Second))))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	r := &reconciling{e: e}
	r.read = func(ctx context.Context, j *jobs.Job[Step]) error {
		if j.Args.Name != "late" {
			return r.e.work(ctx, j)
		}
		var o StepOut
		err := j.DependencyOutput(ctx, "first", &o)
		select {
		case got <- err:
		default:
		}
		return nil
	}
	e.startReconciling(r, true)
	e.wait(res, "late", jobs.Succeeded)
	if _, err := e.ledger.Get(ctx, res.Steps["first"].Queue, res.Steps["first"].JobID); err == nil {
		t.Fatal("first has not expired: the test needs it gone")
	}
	if err := <-got; !errors.Is(err, jobs.ErrNoOutput) {
		t.Fatalf("DependencyOutput of an expired step: %v, want an error matching jobs.ErrNoOutput", err)
	}
}

// Nobody is a kind no pool runs.
type Nobody struct{}

func (Nobody) Kind() string { return "wf_nobody" }

// TestCancelAWorkflowWhoseStepNoPoolRuns: a step of a kind no pool runs
// stays pending (deferred by every pool that claims it); cancelling the
// workflow ends it and its dependents cancelled, and the workflow
// cancelled.
func TestCancelAWorkflowWhoseStepNoPoolRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("orphan").
		Add("a", step("a")).
		Add("x", Nobody{}, workflow.After("a")).
		Add("b", step("b", "x"), workflow.After("x")))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "a", jobs.Succeeded)
	time.Sleep(300 * time.Millisecond) // x is claimed and deferred meanwhile
	if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "no worker"); err != nil {
		t.Fatal(err)
	}
	e.wait(res, "x", jobs.Cancelled)
	e.wait(res, "b", jobs.Cancelled)
	if st := e.status(res.ID); st.State != workflow.Cancelled || e.runs.count("b") != 0 {
		t.Fatalf("workflow %s, b ran %d times (%+v)", st.State, e.runs.count("b"), st.Steps)
	}
}

// TestCancelWhileAStepCompletes: a step running when its workflow is
// cancelled, whose handler finishes anyway, succeeds (its outcome is
// committed by its token), and its dependent, defined before it, never
// starts.
func TestCancelWhileAStepCompletes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	r := &reconciling{e: e}
	r.read = func(ctx context.Context, j *jobs.Job[Step]) error {
		if j.Args.Name == "charge" {
			close(started)
			<-release // ignores its context's cancellation: its effect is done
		}
		return e.work(context.WithoutCancel(ctx), j)
	}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("in-flight").
		Add("root", step("root")).
		Add("ship", step("ship", "charge"), workflow.After("charge")).
		Add("charge", step("charge", "root"), workflow.After("root")))
	if err != nil {
		t.Fatal(err)
	}
	e.startReconciling(r, true)
	<-started
	st, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflow.Running {
		t.Fatalf("cancelled with charge running: %s", st.State)
	}
	close(release)
	e.wait(res, "charge", jobs.Succeeded)
	e.wait(res, "ship", jobs.Cancelled)
	if n := e.runs.count("ship"); n != 0 {
		t.Fatalf("ship cancelled, but ran %d times", n)
	}
	if st := e.status(res.ID); st.State != workflow.Cancelled {
		t.Fatalf("workflow %s (%+v)", st.State, st.Steps)
	}
}

// requireStaysCancelled waits a moment (a step that wrongly starts again
// has run by then: pools here poll every few milliseconds), then fails t
// unless each named step ran exactly as often as runs says and workflow res
// is cancelled.
func (e *env) requireStaysCancelled(t *testing.T, res *workflow.Result, runs map[string]int) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	for step, want := range runs {
		if n := e.runs.count(step); n != want {
			t.Fatalf("%s ran %d times, want %d (%v)", step, n, want, e.runs.order)
		}
	}
	if st := e.status(res.ID); st.State != workflow.Cancelled {
		t.Fatalf("workflow %s (%+v)", st.State, st.Steps)
	}
}
