package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// TestStepEndOutlivesItsExpiredJob: steps that ended (succeeded, dead,
// cancelled; in the workflow's home queue and in another) and whose job
// records expired before any maintenance pass read their workflow keep
// their end: Get reads them missing (expired), not lost, and counts each
// as it ended, and the leader's first pass settles each workflow by those
// ends, ending none of its steps lost.
func TestStepEndOutlivesItsExpiredJob(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	ctx := context.Background()
	other := jobs.Queue("wf-other")
	later := jobs.Delay(time.Hour)
	good, err := workflow.Enqueue(ctx, e.client, workflow.New("good").
		Add("ok", step("ok")).
		Add("far", step("far"), workflow.Options(other)).
		Add("next", step("next", "ok", "far"), workflow.After("ok", "far"), workflow.Options(other)))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := workflow.Enqueue(ctx, e.client, workflow.New("bad").
		Add("bad", Step{Name: "bad", Fail: true}).
		Add("stop", step("stop"), workflow.Options(later)).
		Add("farbad", Step{Name: "farbad", Fail: true}, workflow.Options(other)).
		Add("farstop", step("farstop"), workflow.Options(other, later)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"stop", "farstop"} {
		ref := bad.Steps[s]
		if _, err := e.client.Cancel(ctx, ref.Queue, ref.JobID, "ops", ""); err != nil {
			t.Fatal(err)
		}
	}
	// workers only: no maintenance pass reads a workflow until the jobs expired
	stop := e.run(false, nil, func(p *worker.Pool) error { return worker.Register(p, jobs.WorkFunc[Step](e.work)) },
		jobs.DefaultQueue, "wf-other")
	ended := []struct {
		res   *workflow.Result
		step  string
		state jobs.State
	}{{good, "ok", jobs.Succeeded}, {good, "far", jobs.Succeeded}, {good, "next", jobs.Succeeded},
		{bad, "bad", jobs.Dead}, {bad, "stop", jobs.Cancelled}, {bad, "farbad", jobs.Dead}, {bad, "farstop", jobs.Cancelled}}
	for _, s := range ended {
		e.wait(s.res, s.step, s.state)
	}
	stop()
	for _, s := range ended {
		k := e.ledger.JobKey(s.res.Steps[s.step].Queue, s.res.Steps[s.step].JobID)
		redistest.Await(t, e.rdb, k, s.step+"'s job expired", func() bool { return e.rdb.Exists(ctx, k).Val() == 0 })
	}
	check := func(when string, res *workflow.Result, want string) {
		t.Helper()
		st := e.status(res.ID)
		for _, s := range st.Steps {
			if s.State != "missing" {
				t.Errorf("%s: step %s reads %s %q, want missing (expired)", when, s.Name, s.State, s.Reason)
			}
		}
		if st.State != want {
			t.Errorf("%s: workflow %s %s, want %s", when, st.Name, st.State, want)
		}
	}
	check("before a pass", good, workflow.Succeeded)
	check("before a pass", bad, workflow.Failed)
	e.start(jobs.DefaultQueue, "wf-other")
	for _, w := range []struct {
		res  *workflow.Result
		want string
	}{{good, workflow.Succeeded}, {bad, workflow.Failed}} {
		wk := e.ns + ":{default}:wf:" + w.res.ID
		redistest.Await(t, e.rdb, wk, "the workflow settled", func() bool { return e.rdb.HGet(ctx, wk, "final").Val() != "" })
		if got := e.rdb.HGet(ctx, wk, "final").Val(); got != w.want {
			t.Errorf("workflow %s counted as finished %s, want %s", w.res.ID, got, w.want)
		}
		check("after the pass", w.res, w.want)
	}
	if n := counter(t, e.reg, "fencedq_workflow_steps_lost_total", ""); n != 0 {
		t.Errorf("%v steps counted lost, want none", n)
	}
}

// TestStepEndNotMovedYetIsNotLost: a step of another queue than its
// workflow's home whose end is still in its queue's hand-over record (its
// completer stopped before the move) when its job expired is not ended
// lost by the leader's pass: the pass settles the workflow by that end.
func TestStepEndNotMovedYetIsNotLost(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("far").
		Add("near", step("near")).
		Add("far", step("far"), workflow.Options(jobs.Queue("wf-other"))))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.run(false, nil, func(p *worker.Pool) error { return worker.Register(p, jobs.WorkFunc[Step](e.work)) },
		jobs.DefaultQueue, "wf-other")
	e.wait(res, "near", jobs.Succeeded)
	e.wait(res, "far", jobs.Succeeded)
	stop()
	// as a completer that stopped between far's completion and its move left it
	wk := e.ns + ":{default}:wf:" + res.ID
	hk := e.ns + ":{wf-other}:handover"
	if err := e.rdb.HDel(ctx, wk, "end:far").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, hk, "default\n@wf:"+res.ID+"\nfar", "succeeded 1").Err(); err != nil {
		t.Fatal(err)
	}
	k := e.ledger.JobKey("wf-other", res.Steps["far"].JobID)
	redistest.Await(t, e.rdb, k, "far's job expired", func() bool { return e.rdb.Exists(ctx, k).Val() == 0 })
	e.start(jobs.DefaultQueue, "wf-other")
	redistest.Await(t, e.rdb, wk, "the workflow settled", func() bool { return e.rdb.HGet(ctx, wk, "final").Val() != "" })
	if got := e.rdb.HGet(ctx, wk, "final").Val(); got != workflow.Succeeded {
		t.Errorf("counted as finished %s, want succeeded", got)
	}
	if n := counter(t, e.reg, "fencedq_workflow_steps_lost_total", ""); n != 0 {
		t.Errorf("%v steps counted lost, want none", n)
	}
	redistest.Await(t, e.rdb, hk, "the hand-over moved", func() bool { return e.rdb.HLen(ctx, hk).Val() == 0 })
	if got := e.rdb.HGet(ctx, wk, "end:far").Val(); got != string(jobs.Succeeded) {
		t.Errorf("far's recorded end %q, want succeeded", got)
	}
}
