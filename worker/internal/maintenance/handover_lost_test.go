package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
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

// lostStep is one step of a test workflow for lostWorkflow.
type lostStep struct {
	name, queue string
	deps, allow []string
}

// lostWorkflow enqueues workflow id (home queue: its first step's) of
// steps, each a job "<id>.<name>".
func (f *fixture) lostWorkflow(id string, steps ...lostStep) {
	f.t.Helper()
	w := &ledger.NewWorkflow{ID: id, Home: steps[0].queue}
	def := ledger.WorkflowDef{Name: id}
	for _, s := range steps {
		var next []ledger.StepRef
		for _, d := range steps {
			if slices.Contains(d.deps, s.name) {
				next = append(next, ledger.StepRef{Queue: d.queue, ID: id + "." + d.name})
			}
		}
		w.Steps = append(w.Steps, ledger.WorkflowStep{
			Job:  &ledger.NewJob{ID: id + "." + s.name, Kind: "k", Queue: s.queue, Payload: []byte(`{}`), Display: []byte(`{}`)},
			Name: s.name, Deps: s.deps, AllowFail: s.allow, Next: next,
		})
		def.Steps = append(def.Steps, ledger.StepDef{Name: s.name, Queue: s.queue, ID: id + "." + s.name, Kind: "k", Deps: s.deps, AllowFail: s.allow})
	}
	var err error
	if w.Record, err = json.Marshal(def); err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) job(q, id string) *jobs.Record {
	f.t.Helper()
	r, err := f.ledger.Get(f.ctx, q, id)
	if err != nil {
		f.t.Fatalf("job %s of %s: %v", id, q, err)
	}
	return r
}

// TestHandoverPassEndsAStepWhoseJobRecordIsMissing: a workflow step's job
// record deleted by hand (DEL) while its workflow runs is ended lost by
// the next full hand-over pass: the record holds it dead with reason "job
// record missing", logged at error level with the workflow and step ids
// and counted once; its dependents hear a dead end by the workflow's
// rules (one in another queue cancelled, and its own dependent after it;
// one allowing the failure promoted), a step independent of it is left
// as it was, and later passes change nothing more. Once the rest ends the
// workflow is counted failed.
func TestHandoverPassEndsAStepWhoseJobRecordIsMissing(t *testing.T) {
	f := newFixture(t)
	h := f.leader(f.config()).handover
	f.lostWorkflow("wf",
		lostStep{name: "s0", queue: "a"},
		lostStep{name: "s1", queue: "b", deps: []string{"s0"}},
		lostStep{name: "s2", queue: "a", deps: []string{"s0"}, allow: []string{"s0"}},
		lostStep{name: "s3", queue: "b", deps: []string{"s1"}},
		lostStep{name: "s4", queue: "a"},
	)
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")); v != 0 {
		t.Fatalf("steps lost before any was deleted: %v", v)
	}
	s4Key := f.ledger.JobKey("a", "wf.s4")
	s4 := f.rdb.HGetAll(f.ctx, s4Key).Val()
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey("a", "wf.s0")).Err(); err != nil {
		t.Fatal(err)
	}
	h.fullAt = time.Time{} // a full pass: no script notes a DEL
	for pass := range 3 {
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
		if v := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")); v != 1 {
			t.Fatalf("pass %d: steps lost %v, want 1", pass, v)
		}
		s1 := f.job("b", "wf.s1")
		if s1.State != jobs.Cancelled || s1.Reason != "dependency s0 lost: job record missing" {
			t.Fatalf("pass %d: s1 (after the lost s0): %s %q, want cancelled, the loss its reason", pass, s1.State, s1.Reason)
		}
		if s3 := f.job("b", "wf.s3"); s3.State != jobs.Cancelled || !strings.Contains(s3.Reason, "dependency s1") {
			t.Fatalf("pass %d: s3 (after s1): %s %q, want cancelled by s1", pass, s3.State, s3.Reason)
		}
		if s2 := f.job("a", "wf.s2"); s2.State != jobs.Pending {
			t.Fatalf("pass %d: s2 (allows s0 to fail): %s, want pending", pass, s2.State)
		}
		if got := f.rdb.HGetAll(f.ctx, s4Key).Val(); !maps.Equal(got, s4) {
			t.Fatalf("pass %d: the independent s4 changed:\n%v\nwas\n%v", pass, got, s4)
		}
		if f.rdb.Exists(f.ctx, f.ledger.JobKey("a", "wf.s0")).Val() != 0 {
			t.Fatalf("pass %d: the lost step's job record was written again", pass)
		}
		for _, q := range []string{"a", "b"} {
			if n := f.rdb.HLen(f.ctx, f.ns+":{"+q+"}:handover").Val(); n != 0 {
				t.Fatalf("pass %d: %d hand-over records left in %s", pass, n, q)
			}
		}
		info, err := f.ledger.Workflow(f.ctx, "a", "wf")
		if err != nil {
			t.Fatal(err)
		}
		if info.Ends["s0"] != jobs.Dead || info.Lost["s0"] != ledger.LostReason || len(info.Lost) != 1 {
			t.Fatalf("pass %d: the record's ends %v, lost %v; want s0 dead, lost for %q", pass, info.Ends, info.Lost, ledger.LostReason)
		}
		if !f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "wf").Val() {
			t.Fatalf("pass %d: the workflow settled with s2 and s4 pending", pass)
		}
		h.fullAt = time.Time{}
	}
	if !f.logged(`"level":"ERROR"`, "job record is missing", `"workflow":"wf"`, `"step":"s0"`, `"job_id":"wf.s0"`) {
		t.Fatalf("the lost step is not logged at error level with its workflow and step:\n%s", f.logs.String())
	}
	for _, s := range []string{"wf.s2", "wf.s4"} {
		if _, err := f.client.Cancel(f.ctx, "a", s, "ops", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 1 {
		t.Fatalf("workflows finished failed: %v, want 1", got)
	}
}

// TestLostStepLeavesADependentThatHeardItsEnd: a step whose job is gone
// after it succeeded and its end reached its dependents, with no end on
// its workflow's record (removed by hand), is ended lost, but a dependent
// still waiting for another dependency keeps waiting: the dead end reaches
// only a step still waiting for the lost one.
func TestLostStepLeavesADependentThatHeardItsEnd(t *testing.T) {
	f := newFixture(t)
	h := f.leader(f.config()).handover
	f.lostWorkflow("wf",
		lostStep{name: "s0", queue: "a"},
		lostStep{name: "s1", queue: "a"},
		lostStep{name: "join", queue: "b", deps: []string{"s0", "s1"}},
	)
	claimed := f.claim("a", time.Minute)
	if claimed != "wf.s0" {
		t.Fatalf("claimed %s, want wf.s0", claimed)
	}
	j, err := f.ledger.Get(f.ctx, "a", claimed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Complete(f.ctx, "a", []ledger.Completion{{ID: claimed, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.MoveHandovers(f.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	join := f.rdb.HGetAll(f.ctx, f.ledger.JobKey("b", "wf.join")).Val()
	if join["state"] != "waiting" {
		t.Fatalf("join after s0 succeeded: %v", join)
	}
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey("a", "wf.s0")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.HDel(f.ctx, f.ns+":{a}:wf:wf", "end:s0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")); v != 1 {
		t.Fatalf("steps lost %v, want 1", v)
	}
	if got := f.rdb.HGetAll(f.ctx, f.ledger.JobKey("b", "wf.join")).Val(); !maps.Equal(got, join) {
		t.Fatalf("join, which heard s0's end already, changed:\n%v\nwas\n%v", got, join)
	}
}

// failHomeCommit fails a workflow's home wf_enqueue call (its commit)
// without sending it, as a client dying between a workflow's calls would.
type failHomeCommit struct{ on atomic.Bool }

func (f *failHomeCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failHomeCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.on.Load() && (cmd.Name() == "fcall" || cmd.Name() == "evalsha" || cmd.Name() == "eval") &&
			slices.Contains(cmd.Args(), any("home")) {
			cmd.SetErr(errors.New("connection reset by peer"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (f *failHomeCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestHandoverPassLeavesInFlightWorkflowsAlone: full hand-over passes over
// workflows in flight (a step running, one pending, steps waiting in
// another queue, then the running step's end promoting its dependent)
// and over a workflow whose enqueue wrote its steps in another queue but
// has not committed it end no step lost: no step's job, no record's end
// and no count changes but what the passes always do.
func TestHandoverPassLeavesInFlightWorkflowsAlone(t *testing.T) {
	f := newFixture(t)
	h := f.leader(f.config()).handover
	f.lostWorkflow("run",
		lostStep{name: "s0", queue: "a"},
		lostStep{name: "s1", queue: "b", deps: []string{"s0"}},
		lostStep{name: "s2", queue: "b"},
	)
	if id := f.claim("a", time.Minute); id != "run.s0" {
		t.Fatalf("claimed %s, want run.s0", id)
	}
	hook := &failHomeCommit{}
	f.rdb.AddHook(hook)
	hook.on.Store(true)
	w := &ledger.NewWorkflow{ID: "half", Home: "c", Record: []byte(`{"steps":[{"name":"s0","queue":"c","id":"half.s0","kind":"k"},{"name":"s1","queue":"b","id":"half.s1","kind":"k","deps":["s0"]}]}`)}
	w.Steps = []ledger.WorkflowStep{
		{Job: &ledger.NewJob{ID: "half.s0", Kind: "k", Queue: "c", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s0",
			Next: []ledger.StepRef{{Queue: "b", ID: "half.s1"}}},
		{Job: &ledger.NewJob{ID: "half.s1", Kind: "k", Queue: "b", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s1", Deps: []string{"s0"}},
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err == nil {
		t.Fatal("a workflow whose commit failed: enqueued")
	}
	hook.on.Store(false)
	if f.rdb.Exists(f.ctx, f.ledger.JobKey("b", "half.s1")).Val() != 1 {
		t.Fatal("the uncommitted workflow's part was not written")
	}
	ids := []struct{ q, id string }{{"a", "run.s0"}, {"b", "run.s1"}, {"b", "run.s2"}, {"b", "half.s1"}}
	before := map[string]map[string]string{}
	for _, j := range ids {
		before[j.id] = f.rdb.HGetAll(f.ctx, f.ledger.JobKey(j.q, j.id)).Val()
	}
	for pass := range 3 {
		h.fullAt = time.Time{}
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
		for _, j := range ids {
			if got := f.rdb.HGetAll(f.ctx, f.ledger.JobKey(j.q, j.id)).Val(); !maps.Equal(got, before[j.id]) {
				t.Fatalf("pass %d: %s changed:\n%v\nwas\n%v", pass, j.id, got, before[j.id])
			}
		}
		info, err := f.ledger.Workflow(f.ctx, "a", "run")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Ends) != 0 || len(info.Lost) != 0 {
			t.Fatalf("pass %d: the running workflow's record holds ends %v, lost %v", pass, info.Ends, info.Lost)
		}
		if v := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")) +
			testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("c")); v != 0 {
			t.Fatalf("pass %d: steps lost %v, want 0", pass, v)
		}
	}
	// s0 ends and s1 is promoted: the next passes find nothing lost
	j := f.job("a", "run.s0")
	if _, err := f.ledger.Complete(f.ctx, "a", []ledger.Completion{{ID: "run.s0", Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	h.fullAt = time.Time{}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if s1 := f.job("b", "run.s1"); s1.State != jobs.Pending {
		t.Fatalf("s1 after s0 succeeded and a pass: %s, want pending", s1.State)
	}
	if v := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")); v != 0 {
		t.Fatalf("steps lost %v, want 0", v)
	}
}
