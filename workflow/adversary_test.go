package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// requireNothingWritten fails t when the namespace of e holds any key.
func (e *env) requireNothingWritten(t *testing.T) {
	t.Helper()
	if keys, _ := e.rdb.Keys(context.Background(), "*"+e.ns+"*").Result(); len(keys) != 0 {
		t.Fatalf("refused workflows wrote %d keys: %v", len(keys), keys)
	}
}

// requireRefused fails t unless w is refused by Validate and by Enqueue
// (with an operation id) as jobs.ErrInvalid, with a one-line, valid UTF-8
// message containing want.
func (e *env) requireRefused(t *testing.T, w *workflow.Workflow, want string) {
	t.Helper()
	for _, err := range []error{w.Validate(), func() error {
		_, err := workflow.Enqueue(context.Background(), e.client, w, workflow.OperationID("adv:"+t.Name()))
		return err
	}()} {
		switch msg := fmt.Sprint(err); {
		case !errors.Is(err, jobs.ErrInvalid):
			t.Fatalf("%v, want ErrInvalid", err)
		case !strings.Contains(msg, want):
			t.Fatalf("%q does not say %q", msg, want)
		case strings.ContainsAny(msg, "\n\r") || !utf8.ValidString(msg):
			t.Fatalf("%q is not one line of valid UTF-8", msg)
		}
	}
}

// TestCyclesAreRefusedBeforeWriting: a dependency cycle of any length, in
// any order of definition, behind acyclic steps or not, and a step
// depending on itself, are refused as jobs.ErrInvalid, with nothing written.
func TestCyclesAreRefusedBeforeWriting(t *testing.T) {
	e := newEnv(t)
	cases := map[string]struct {
		w    *workflow.Workflow
		want string
	}{
		"a→b→a": {workflow.New("x").
			Add("a", step("a"), workflow.After("b")).
			Add("b", step("b"), workflow.After("a")), "cycle"},
		"a→b→c→d→a": {workflow.New("x").
			Add("a", step("a"), workflow.After("d")).
			Add("b", step("b"), workflow.After("a")).
			Add("c", step("c"), workflow.After("b")).
			Add("d", step("d"), workflow.After("c")), "cycle"},
		"behind a root": {workflow.New("x").
			Add("root", step("root")).
			Add("x", step("x"), workflow.After("root", "z")).
			Add("y", step("y"), workflow.After("x")).
			Add("z", step("z"), workflow.After("y")).
			Add("leaf", step("leaf"), workflow.After("root")), "cycle"},
		"self": {workflow.New("x").
			Add("root", step("root")).
			Add("a", step("a"), workflow.After("root", "a")), "itself"},
		"self, allowed to fail": {workflow.New("x").
			Add("a", step("a"), workflow.After("a"), workflow.AllowFailure("a")), "itself"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { e.requireRefused(t, c.w, c.want) })
	}
	e.requireNothingWritten(t)
}

// TestOddStepNamesAreRefused: a step name of characters a key or a
// terminal would read otherwise, or longer than 64 bytes, is refused as
// jobs.ErrInvalid with a clear message, nothing written; as a dependency
// it names no step. A 64-byte name is fine.
func TestOddStepNamesAreRefused(t *testing.T) {
	e := newEnv(t)
	names := []string{"", "{a}", "a{", "}", "a:b", "*", "a*", "a b", "a\nb", "a\r", "a\x00", "\xff\xfe",
		"é", "a/b", "a.b", strings.Repeat("a", 65), strings.Repeat("é", 40)}
	for _, name := range names {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			e.requireRefused(t, workflow.New("x").Add("ok", step("ok")).Add(name, step("odd")), "step name")
			e.requireRefused(t, workflow.New("x").Add("ok", step("ok"), workflow.After(name)), "not a step")
		})
	}
	e.requireNothingWritten(t)
	if err := workflow.New("x").Add(strings.Repeat("a", 64), step("a")).Validate(); err != nil {
		t.Fatalf("a 64-byte name: %v", err)
	}
}

// TestWorkflowAtMaxStepsRuns: a workflow of MaxSteps steps (one root, the
// rest after it) runs every step once and succeeds; one step more is
// refused with nothing written.
func TestWorkflowAtMaxStepsRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	build := func(n int) *workflow.Workflow {
		w := workflow.New("widest").Add("root", step("root"))
		for i := 1; i < n; i++ {
			w.Add(fmt.Sprintf("s%d", i), step(fmt.Sprintf("s%d", i), "root"), workflow.After("root"))
		}
		return w
	}
	e.requireRefused(t, build(workflow.MaxSteps+1), "at most")
	e.requireNothingWritten(t)
	res, err := workflow.Enqueue(ctx, e.client, build(workflow.MaxSteps), workflow.OperationID("widest"))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	// A thousand steps, each claimed, run and committed, and the workflow's
	// record updated for each: the default bound is for one event, and a
	// loaded machine takes longer than that for this much work. The bound
	// only fails a run that stalls; it says nothing of how fast it is.
	e.awaitStateWithin(res.ID, workflow.Succeeded, 3*time.Minute)
	st := e.status(res.ID)
	if st.Done != workflow.MaxSteps || st.Total != workflow.MaxSteps {
		t.Fatalf("%d/%d steps done, want %d", st.Done, st.Total, workflow.MaxSteps)
	}
	for _, s := range st.Steps {
		if n := e.runs.count(s.Name); n != 1 || s.State != jobs.Succeeded {
			t.Fatalf("step %s: %s, ran %d times", s.Name, s.State, n)
		}
	}
}

// awaitState waits for workflow id to read state.
func (e *env) awaitState(id, state string) {
	e.t.Helper()
	e.awaitStateWithin(id, state, testsignal.DefaultTimeout)
}

// awaitStateWithin is awaitState with bound (scaled by testsignal.Scale)
// instead of the default, for a workflow of many steps.
func (e *env) awaitStateWithin(id, state string, bound time.Duration) {
	e.t.Helper()
	redistest.AwaitWithin(e.t, e.rdb, e.ns, "workflow "+id+" "+state, bound, func() bool {
		st, err := workflow.Get(context.Background(), e.client, id)
		return err == nil && st.State == state
	})
}

// TestCancelWhileStepsRun: cancelling a workflow while two steps run asks
// both to stop: the one honouring its context ends cancelled without
// running again, the one finishing anyway succeeds; the steps waiting
// after them end cancelled and never start, nor does anything once both
// ended; the workflow ends cancelled, and cancelling it again changes
// nothing.
func TestCancelWhileStepsRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	politeStarted, stubbornStarted := make(chan struct{}), make(chan struct{})
	started := map[string]chan struct{}{"polite": politeStarted, "stubborn": stubbornStarted}
	release := make(chan struct{})
	r := &reconciling{e: e}
	r.read = func(ctx context.Context, j *jobs.Job[Step]) error {
		mu.Lock()
		ch, first := started[j.Args.Name]
		delete(started, j.Args.Name)
		mu.Unlock()
		switch {
		case j.Args.Name == "polite":
			e.runs.add(j.Args.Name)
			if first {
				close(ch)
			}
			<-ctx.Done() // stops when asked
			return ctx.Err()
		case j.Args.Name == "stubborn" && first:
			close(ch)
			<-release // its effect is done: it finishes anyway
			return e.work(context.WithoutCancel(ctx), j)
		}
		return e.work(ctx, j)
	}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("running").
		Add("root", step("root")).
		Add("polite", step("polite"), workflow.After("root")).
		Add("stubborn", step("stubborn"), workflow.After("root")).
		Add("join", step("join"), workflow.After("polite", "stubborn"), workflow.AllowFailure("polite")).
		Add("tail", step("tail"), workflow.After("join")).
		Add("side", step("side"), workflow.After("stubborn")))
	if err != nil {
		t.Fatal(err)
	}
	e.startReconciling(r, true)
	<-politeStarted
	<-stubbornStarted
	st, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflow.Running || st.CancelledBy != "operator:ada" {
		t.Fatalf("cancelled with two steps running: %s by %q", st.State, st.CancelledBy)
	}
	for _, name := range []string{"join", "tail", "side"} {
		if s := st.Steps[stepIndex(st, name)]; s.State != jobs.Cancelled || s.Reason != "cancelled by operator:ada" {
			t.Fatalf("waiting step %s after the cancel: %s (%q)", name, s.State, s.Reason)
		}
	}
	e.wait(res, "polite", jobs.Cancelled)
	close(release)
	e.wait(res, "stubborn", jobs.Succeeded) // its completion would have promoted side
	e.awaitState(res.ID, workflow.Cancelled)
	st = e.status(res.ID)
	for _, name := range []string{"join", "tail", "side"} {
		if s := st.Steps[stepIndex(st, name)]; s.State != jobs.Cancelled || s.Attempts != 0 || e.runs.count(name) != 0 {
			t.Fatalf("step %s: %s after %d attempts, ran %d times", name, s.State, s.Attempts, e.runs.count(name))
		}
	}
	if n := e.runs.count("polite"); n != 1 {
		t.Fatalf("polite ran %d times after it was asked to stop: %v", n, e.runs.order)
	}
	again, err := workflow.Cancel(ctx, e.client, res.ID, "bob", "again")
	if err != nil {
		t.Fatalf("cancelling a cancelled workflow again: %v", err)
	}
	if again.State != workflow.Cancelled || again.CancelledBy != "operator:ada" {
		t.Fatalf("after cancelling again: %s by %q", again.State, again.CancelledBy)
	}
	for i, s := range again.Steps {
		if s.State != st.Steps[i].State || s.Reason != st.Steps[i].Reason {
			t.Fatalf("cancelling again changed step %s: %s (%q), was %s (%q)", s.Name, s.State, s.Reason, st.Steps[i].State, st.Steps[i].Reason)
		}
	}
}

func stepIndex(st *workflow.Status, name string) int {
	for i, s := range st.Steps {
		if s.Name == name {
			return i
		}
	}
	panic("no step " + name)
}

// TestUncertainStepInsideAWorkflow: a step whose handler returns
// jobs.Unknown holds its dependents waiting, unrun, until it is resolved;
// then they follow the resolution: found not applied (the reconciler, or
// an operator's re-run) it runs again and they run after it; decided dead,
// the dependent that needs it is cancelled and the one allowing its
// failure runs.
func TestUncertainStepInsideAWorkflow(t *testing.T) {
	ctx := context.Background()
	graph := workflow.New("unsure").
		Add("charge", Step{Name: "charge", Unknown: true}).
		Add("ship", step("ship", "charge"), workflow.After("charge")).
		Add("audit", step("audit"), workflow.After("charge"), workflow.AllowFailure("charge"))
	held := func(t *testing.T, e *env, res *workflow.Result) {
		t.Helper()
		for _, s := range []string{"ship", "audit"} {
			if st := e.stepState(res, s); st != "waiting" || e.runs.count(s) != 0 {
				t.Fatalf("%s is %s (ran %d times) while charge is unresolved", s, st, e.runs.count(s))
			}
		}
	}
	ran := func(t *testing.T, e *env, res *workflow.Result, charge int) {
		t.Helper()
		e.wait(res, "ship", jobs.Succeeded)
		e.wait(res, "audit", jobs.Succeeded)
		e.awaitState(res.ID, workflow.Succeeded)
		if e.runs.count("charge") != charge || e.runs.count("ship") != 1 || e.runs.count("audit") != 1 {
			t.Fatalf("runs %v, want charge %d times, ship and audit once", e.runs.order, charge)
		}
		if e.runs.index("ship") < e.runs.index("charge") {
			t.Fatalf("ship ran before charge: %v", e.runs.order)
		}
	}

	t.Run("reconciled not applied", func(t *testing.T) {
		e := newEnv(t)
		res, err := workflow.Enqueue(ctx, e.client, graph)
		if err != nil {
			t.Fatal(err)
		}
		r := &reconciling{e: e}
		stop := e.startReconciling(r, false) // no reconciler yet
		e.wait(res, "charge", jobs.Uncertain)
		stop()
		held(t, e, res)
		e.fixed.Store(true)
		r.verdict.Store(int32(jobs.NotApplied))
		e.startReconciling(r, true)
		ran(t, e, res, 2)
	})

	t.Run("operator re-run", func(t *testing.T) {
		e := newEnv(t)
		res, err := workflow.Enqueue(ctx, e.client, graph)
		if err != nil {
			t.Fatal(err)
		}
		e.start()
		e.wait(res, "charge", jobs.Review)
		held(t, e, res)
		e.fixed.Store(true)
		ref := res.Steps["charge"]
		if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "ada", "not charged"); err != nil {
			t.Fatal(err)
		}
		ran(t, e, res, 2)
	})

	t.Run("decided dead", func(t *testing.T) {
		e := newEnv(t)
		res, err := workflow.Enqueue(ctx, e.client, graph)
		if err != nil {
			t.Fatal(err)
		}
		e.start()
		e.wait(res, "charge", jobs.Review)
		held(t, e, res)
		ref := res.Steps["charge"]
		if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideDead, "ada", "card refused"); err != nil {
			t.Fatal(err)
		}
		e.wait(res, "audit", jobs.Succeeded)
		if r := e.wait(res, "ship", jobs.Cancelled); r.Attempts != 0 || r.Reason != "dependency charge ended dead" {
			t.Fatalf("ship: %d attempts, reason %q", r.Attempts, r.Reason)
		}
		e.awaitState(res.ID, workflow.Failed)
		if e.runs.count("ship") != 0 || e.runs.count("charge") != 1 {
			t.Fatalf("runs %v", e.runs.order)
		}
	})

	// Found not applied with no retry left, the step's attempt failed: it
	// ends dead, and its end reaches its dependents as any dead step's.
	t.Run("reconciled not applied, attempts spent", func(t *testing.T) {
		e := newEnv(t)
		spent := workflow.New("unsure").
			Add("charge", Step{Name: "charge", Unknown: true}, workflow.Options(jobs.MaxRetries(0))).
			Add("ship", step("ship", "charge"), workflow.After("charge")).
			Add("audit", step("audit"), workflow.After("charge"), workflow.AllowFailure("charge"))
		res, err := workflow.Enqueue(ctx, e.client, spent)
		if err != nil {
			t.Fatal(err)
		}
		r := &reconciling{e: e}
		r.verdict.Store(int32(jobs.NotApplied))
		e.startReconciling(r, true)
		if c := e.wait(res, "charge", jobs.Dead); c.Attempts != 1 || !strings.Contains(c.Reason, "retries exhausted") {
			t.Fatalf("charge dead after %d attempts, reason %q; want 1, retries exhausted", c.Attempts, c.Reason)
		}
		e.wait(res, "audit", jobs.Succeeded)
		if r := e.wait(res, "ship", jobs.Cancelled); r.Attempts != 0 || r.Reason != "dependency charge ended dead" {
			t.Fatalf("ship: %d attempts, reason %q", r.Attempts, r.Reason)
		}
		e.awaitState(res.ID, workflow.Failed)
		if e.runs.count("ship") != 0 || e.runs.count("charge") != 1 {
			t.Fatalf("runs %v", e.runs.order)
		}
	})
}

// TestOddWorkflowNamesAreRefused: a workflow's name is shown as it was
// given (inspect, the dashboard), so one that is not UTF-8 (which its JSON
// record would keep only as U+FFFD) or holds control characters is refused
// before anything is written, as an operator's name is.
func TestOddWorkflowNamesAreRefused(t *testing.T) {
	e := newEnv(t)
	for i, name := range []string{"\xff\xfe", "order\x00", "order\n7", "\x1b]0;pwned\x07", "a\u0085b", strings.Repeat("a", 201)} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e.requireRefused(t, workflow.New(name).Add("a", step("a")), "name")
		})
	}
	e.requireNothingWritten(t)
	for _, name := range []string{"", "commande n° 7 — été", strings.Repeat("a", 200)} {
		if err := workflow.New(name).Add("a", step("a")).Validate(); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
}
