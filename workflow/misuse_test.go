package workflow_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// TestEnqueueRefusesABadOperationID: the workflow's operation id, and the
// ones its steps derive from it, are checked as a job's are, before
// anything is written. An empty one is refused too (as jobs.OperationID("")
// is), not taken for none: an id built from a value left empty would
// enqueue the workflow again, every step run again, at each retry.
func TestEnqueueRefusesABadOperationID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cases := map[string]string{
		"empty":              "",
		"control characters": "order\x1b[31m7",
		"invalid UTF-8":      "order\xff",
		"too long":           strings.Repeat("o", jobs.MaxOperationIDLen+1),
		"too long for steps": strings.Repeat("o", jobs.MaxOperationIDLen-2), // "<op>/charge"
	}
	for name, op := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID(op)); !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Enqueue: %v, want ErrInvalid", err)
			}
		})
	}
	// a step with its own operation id does not derive one
	w := workflow.New("x").Add("a", step("a"), workflow.Options(jobs.OperationID("a-own")))
	if _, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID(cases["too long for steps"])); err != nil {
		t.Fatal(err)
	}
	if keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*job:*").Result(); len(keys) != 1 {
		t.Fatalf("job keys %v, want the one step of the valid workflow", keys)
	}
}

// TestEnqueueAgainWithAnotherGraph: an operation id names one workflow
// whatever is given again with it, even a graph whose first step is in
// another queue (another home); the result describes the first.
func TestEnqueueAgainWithAnotherGraph(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first, err := workflow.Enqueue(ctx, e.client, workflow.New("x").
		Add("a", step("a")).Add("b", step("b"), workflow.After("a")), workflow.OperationID("order-9"))
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*workflow.Workflow{
		"other steps": workflow.New("x").Add("c", step("c")).Add("d", step("d"), workflow.After("c")),
		"other home":  workflow.New("x").Add("a", step("a"), workflow.Options(jobs.Queue("other"))).Add("b", step("b"), workflow.After("a")),
	} {
		again, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order-9"))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Deduplicated || again.ID != first.ID || again.Home != first.Home ||
			len(again.Steps) != 2 || again.Steps["a"] != first.Steps["a"] || again.Steps["b"] != first.Steps["b"] {
			t.Fatalf("%s: %+v, want the first workflow %+v", name, again, first)
		}
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d workflows, want 1", len(list))
	}
	if keys, _ := e.rdb.Keys(ctx, e.ns+":{other}:*").Result(); len(keys) != 0 {
		t.Fatalf("the deduplicated enqueue wrote %v", keys)
	}
}

// TestCancelTwiceKeepsTheFirstOperator: cancelling again changes nothing
// recorded; cancelling a workflow that succeeded is refused and writes
// nothing.
func TestCancelTwiceKeepsTheFirstOperator(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left"); err != nil {
		t.Fatal(err)
	}
	st, err := workflow.Cancel(ctx, e.client, res.ID, "bob", "again")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflow.Cancelled || st.CancelledBy != "operator:ada" {
		t.Fatalf("after a second cancel: %s by %q, want cancelled by operator:ada", st.State, st.CancelledBy)
	}
	for _, s := range st.Steps {
		if s.Reason != "cancelled by operator:ada" {
			t.Fatalf("step %s: %q", s.Name, s.Reason)
		}
	}

	done, err := workflow.Enqueue(ctx, e.client, workflow.New("ok").Add("a", step("a")))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(done, "a", jobs.Succeeded)
	if _, err := workflow.Cancel(ctx, e.client, done.ID, "bob", "too late"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("cancel of a succeeded workflow: %v, want ErrWrongState", err)
	}
	if st := e.status(done.ID); st.State != workflow.Succeeded || st.CancelledBy != "" {
		t.Fatalf("after a refused cancel: %s by %q", st.State, st.CancelledBy)
	}
	if _, err := workflow.Cancel(ctx, e.client, "wf-none", "bob", "x"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("cancel of an unknown workflow: %v, want ErrNotFound", err)
	}
}

// TestDependencyOutputOfAStepNotDependedOn: a step reads the outputs of
// the steps it depends on, directly or not; another step's is refused
// (it may not have run yet), whatever the timing.
func TestDependencyOutputOfAStepNotDependedOn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("reads").
		Add("a", step("a")).
		Add("b", step("b", "a"), workflow.After("a")).
		Add("c", step("c", "a"), workflow.After("b")). // a through b
		Add("d", step("d", "b")))                      // no dependency
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "c", jobs.Succeeded)
	r := e.wait(res, "d", jobs.Dead)
	if !strings.Contains(r.Error, "does not depend on step \"b\"") {
		t.Fatalf("d's error %q: want it refused for not depending on b", r.Error)
	}
}

// TestZeroWorkflow: a Workflow's zero value is an empty workflow.
func TestZeroWorkflow(t *testing.T) {
	var w workflow.Workflow
	if err := w.Add("a", step("a")).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.Enqueue(context.Background(), nil, nil); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("Enqueue of nothing: %v, want ErrInvalid", err)
	}
}

// TestNotFoundErrorQuotesAndClipsTheID: the id Get and Cancel were given
// (a caller's input, maybe read from a request) comes back in the error
// clipped and quoted: no line break or escape sequence reaches a log, and
// a huge id does not make a huge error.
func TestNotFoundErrorQuotesAndClipsTheID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := "wf-\n\x1b[31mforged line" + strings.Repeat("x", 100000)
	_, err := workflow.Get(ctx, e.client, id)
	_, err2 := workflow.Cancel(ctx, e.client, id, "ops", "x")
	for _, err := range []error{err, err2} {
		if !errors.Is(err, workflow.ErrNotFound) {
			t.Fatalf("odd id: %v, want ErrNotFound", err)
		}
		if msg := err.Error(); len(msg) > 200 || strings.ContainsAny(msg, "\n\x1b") {
			t.Fatalf("error text of %d bytes, raw: %.120q", len(msg), msg)
		}
	}
}

// TestNilOptionsAreRefused: a nil step option, a nil jobs.Option given to
// workflow.Options, and a nil workflow.Option are refused with ErrInvalid
// before anything is written, instead of panicking (or, for a job option,
// being dropped on the way through the enqueue middleware).
func TestNilOptionsAreRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var (
		step0 workflow.StepOption
		job0  jobs.Option
		wf0   workflow.Option
	)
	for name, enqueue := range map[string]func() error{
		"step option": func() error {
			_, err := workflow.Enqueue(ctx, e.client, workflow.New("x").Add("a", step("a"), step0))
			return err
		},
		"job option": func() error {
			_, err := workflow.Enqueue(ctx, e.client, workflow.New("x").Add("a", step("a"), workflow.Options(jobs.Queue("q"), job0)))
			return err
		},
		"workflow option": func() error {
			_, err := workflow.Enqueue(ctx, e.client, workflow.New("x").Add("a", step("a")), wf0)
			return err
		},
	} {
		if err := enqueue(); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "is nil") {
			t.Errorf("%s: %v, want ErrInvalid saying it is nil", name, err)
		}
	}
	if keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*job:*").Result(); len(keys) != 0 {
		t.Fatalf("job keys %v, want none", keys)
	}
}

type (
	hook      struct{ Call func() }
	hookStep  struct{ Hook *hook } // encodes while Hook is nil, not once set
	countStep int
)

func (hookStep) Kind() string  { return "wf_hook" }
func (countStep) Kind() string { return "wf_count" }

// TestAddRefusesArgsThatCannotBeAJSONObject: a step whose args type cannot
// encode as a JSON object is refused by Add (through Validate and Enqueue,
// matching jobs.ErrInvalid, naming the step), even when this value happens
// to encode (a nil pointer to a struct with a func field); nothing is
// written.
func TestAddRefusesArgsThatCannotBeAJSONObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for name, args := range map[string]jobs.JobArgs{"hook": hookStep{}, "count": countStep(3)} {
		w := workflow.New("x").Add("a", step("a")).Add(name, args, workflow.After("a"))
		if err := w.Validate(); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), `step "`+name+`"`) ||
			!strings.Contains(err.Error(), "args type") {
			t.Errorf("%s: Validate: %v; want jobs.ErrInvalid naming the step and its args type", name, err)
		}
		if _, err := workflow.Enqueue(ctx, e.client, w); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: Enqueue: %v; want jobs.ErrInvalid", name, err)
		}
	}
	if keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*").Result(); len(keys) != 0 {
		t.Errorf("keys %v after refused workflows", keys)
	}
}

// failReads fails, while on, every pipeline with a command cmd on a key
// containing part: a Redis that cannot be reached as a workflow enqueue
// reads.
type failReads struct {
	cmd, part string
	on        atomic.Bool
}

func (f *failReads) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f *failReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f *failReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if k, _ := c.Args()[1].(string); f.on.Load() && c.Name() == f.cmd && strings.Contains(k, f.part) {
				err := errors.New("dial tcp: connection refused")
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// TestEnqueueRedisErrorsAreUnknown: a Redis error while the enqueue reads
// the steps of the workflow it was deduplicated to (after its confirming
// write) matches jobs.ErrEnqueueUnknown, as the package documentation says
// of every Redis error after a write; one while it checks its steps'
// operation ids, a read before any write of the workflow, matches
// jobs.ErrNotSent (nothing written) and not jobs.ErrEnqueueUnknown. A
// caller that retries on either does; the retry writes the workflow, or
// finds it.
func TestEnqueueRedisErrorsAreUnknown(t *testing.T) {
	e := newEnv(t)
	ops := &failReads{cmd: "get", part: ":op:"}
	found := &failReads{cmd: "zscore", part: "workflows"}
	e.rdb.AddHook(ops)
	e.rdb.AddHook(found)
	ctx := context.Background()
	w := workflow.New("w").Add("a", step("a")).Add("b", step("b", "a"), workflow.After("a"))
	for _, f := range []*failReads{ops, found} {
		f.on.Store(true)
		_, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("checked"))
		want, not := jobs.ErrEnqueueUnknown, jobs.ErrNotSent
		if f == ops {
			want, not = jobs.ErrNotSent, jobs.ErrEnqueueUnknown
		}
		if !errors.Is(err, want) || errors.Is(err, not) {
			t.Fatalf("Enqueue while %s fails: %v, want an error matching %v and not %v", f.cmd, err, want, not)
		}
		f.on.Store(false)
		res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("checked"))
		if err != nil || len(res.Steps) != 2 || res.Deduplicated != (f == found) {
			t.Fatalf("Enqueue again: %+v, %v", res, err)
		}
	}
}

// TestListBoundsItsWindow: an offset so large that offset+n overflows, or
// passes jobs.MaxListWindow (List reads offset+n ids of every queue), is
// refused with jobs.ErrInvalid, as Inspector.List's, not a panic or a read
// of every workflow; the largest window allowed still lists.
func TestListBoundsItsWindow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := workflow.Enqueue(ctx, e.client, diamond()); err != nil {
		t.Fatal(err)
	}
	for _, offset := range []int{math.MaxInt - 5, math.MaxInt, jobs.MaxListWindow} {
		if list, err := workflow.List(ctx, e.client, offset, 10); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("List at offset %d = %v, %v, want jobs.ErrInvalid", offset, list, err)
		}
	}
	if list, err := workflow.List(ctx, e.client, jobs.MaxListWindow-10, 10); err != nil || len(list) != 0 {
		t.Fatalf("List at the end of the window = %v, %v, want none", list, err)
	}
}
