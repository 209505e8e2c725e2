package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// failHome fails a workflow's home commit (its wf_enqueue call naming the
// home) without sending it, as a client dying between the calls leaves it.
type failHome struct{ on atomic.Bool }

func (*failHome) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failHome) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.on.Load() && cmd.Name() == "fcall" {
			args := cmd.Args()
			if fn, _ := args[1].(string); strings.Contains(fn, "wf_enqueue") && slices.Contains(args, any("home")) {
				cmd.SetErr(errors.New("connection reset by peer"))
				return cmd.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (*failHome) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestHandoverPassReadsOnlyQueuesWithWorkflows: a hand-over pass over idle
// queues sends one command per queue, and each kind of workflow work,
// alone in its queue among them, is still done by the next pass: a
// hand-over record a completer left, a newly committed workflow to count,
// the part of a workflow whose home commit never came.
func TestHandoverPassReadsOnlyQueuesWithWorkflows(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	h := l.handover
	h.now = f.later(2 * time.Hour) // past UncommittedGrace
	qs := make([]string, 50)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%02d", i)
	}
	if err := f.ledger.RegisterQueues(f.ctx, qs...); err != nil {
		t.Fatal(err)
	}
	// a first pass opens the connections (their handshakes are commands)
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	var cmds commands
	f.rdb.AddHook(&cmds)
	if _, err := f.ledger.Queues(f.ctx); err != nil {
		t.Fatal(err)
	}
	listing := cmds.n.Swap(0) // what listing the queues costs
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n, most := cmds.n.Load(), listing+int64(len(qs)); n > most {
		t.Fatalf("a hand-over pass over %d idle queues sent %d commands, want at most %d", len(qs), n, most)
	}

	step := func(q, id string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`)}
	}
	// q10's step hands over to q11's; the completer's move never came.
	w := &ledger.NewWorkflow{ID: "left", Home: "q10", Record: []byte(`{"steps":[{"name":"s0","queue":"q10","id":"left.s0","kind":"k"},{"name":"s1","queue":"q11","id":"left.s1","kind":"k","deps":["s0"]}]}`)}
	w.Steps = []ledger.WorkflowStep{
		{Job: step("q10", "left.s0"), Name: "s0", Next: []ledger.StepRef{{Queue: "q11", ID: "left.s1"}}},
		{Job: step("q11", "left.s1"), Name: "s1", Deps: []string{"s0"}},
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err != nil {
		t.Fatal(err)
	}
	// Only the hand-over record stays in q10: counting the workflow
	// would read q10 anyway.
	f.rdb.SRem(f.ctx, f.ns+":{q10}:wf_open", "left")
	f.rdb.Del(f.ctx, f.ns+":{q10}:wf_changed")
	f.rdb.HSet(f.ctx, f.ns+":{q10}:handover", "q11\nleft.s1\ns0", "succeeded 7")
	// q20's workflow, committed: counted started by the pass.
	one := &ledger.NewWorkflow{ID: "one", Home: "q20", Record: []byte(`{"steps":[{"name":"s0","queue":"q20","id":"one.s0","kind":"k"}]}`)}
	one.Steps = []ledger.WorkflowStep{{Job: step("q20", "one.s0"), Name: "s0"}}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, one); err != nil {
		t.Fatal(err)
	}
	// q31's step of a workflow whose home (q30) commit failed.
	hook := &failHome{}
	f.rdb.AddHook(hook)
	hook.on.Store(true)
	half := &ledger.NewWorkflow{ID: "half", Home: "q30", Record: []byte(`{"steps":[{"name":"s0","queue":"q30","id":"half.s0","kind":"k"},{"name":"s1","queue":"q31","id":"half.s1","kind":"k","deps":["s0"]}]}`)}
	half.Steps = []ledger.WorkflowStep{
		{Job: step("q30", "half.s0"), Name: "s0", Next: []ledger.StepRef{{Queue: "q31", ID: "half.s1"}}},
		{Job: step("q31", "half.s1"), Name: "s1", Deps: []string{"s0"}},
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, half); err == nil {
		t.Fatal("a workflow whose home commit failed: no error")
	}
	hook.on.Store(false)
	for _, k := range []string{":{q10}:wf_open", ":{q10}:wf_changed", ":{q30}:wf_open", ":{q30}:wf_changed", ":{q31}:wf_changed", ":{q31}:wf_open", ":{q31}:handover"} {
		if n := f.rdb.Exists(f.ctx, f.ns+k).Val(); n != 0 {
			t.Fatalf("%s exists: the queue holds more than the case it stands for", k)
		}
	}

	cmds.n.Store(0)
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := f.ledger.Get(f.ctx, "q11", "left.s1"); err != nil || r.State != jobs.Pending {
		t.Fatalf("q11's step after the pass: %+v, %v; want pending (q10's hand-over moved)", r, err)
	}
	if n := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("q20")); n != 1 {
		t.Fatalf("q20's workflows counted started: %v, want 1", n)
	}
	if r, err := f.ledger.Get(f.ctx, "q31", "half.s1"); err != nil || r.State != jobs.Cancelled {
		t.Fatalf("q31's step of a workflow never committed, after the pass: %+v, %v; want cancelled", r, err)
	}
}

// writes is a go-redis hook that counts the HSETNX commands a client sends.
type writes struct{ n atomic.Int64 }

func (*writes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *writes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hsetnx" {
			w.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (w *writes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "hsetnx" {
				w.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestHandoverPassWritesNothingForAWorkflowSeen: a workflow that stays
// open is counted started by the first pass alone; the passes after it
// read it and write nothing, and count it finished once it is (its step
// cancelled: failed).
func TestHandoverPassWritesNothingForAWorkflowSeen(t *testing.T) {
	f := newFixture(t)
	h := f.leader(f.config()).handover
	w := &ledger.NewWorkflow{ID: "open", Home: "a", Record: []byte(`{"steps":[{"name":"s0","queue":"a","id":"open.s0","kind":"k"}]}`)}
	w.Steps = []ledger.WorkflowStep{{Job: &ledger.NewJob{ID: "open.s0", Kind: "k", Queue: "a", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s0"}}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err != nil {
		t.Fatal(err)
	}
	var hsetnx writes
	f.rdb.AddHook(&hsetnx)
	for pass := range 3 {
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("a")); n != 1 {
			t.Fatalf("after pass %d: workflows started %v, want 1", pass, n)
		}
		if n := hsetnx.n.Load(); n != 1 {
			t.Fatalf("after pass %d: %d HSETNX sent, want 1 (the first pass's)", pass, n)
		}
	}
	if _, err := f.client.Cancel(f.ctx, "a", "open.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); n != 1 {
		t.Fatalf("workflows finished failed %v, want 1", n)
	}
}
