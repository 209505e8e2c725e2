package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// TestWorkflowViewsWithAQueuesMasterDown: with the master of another
// queue than a workflow's (and not the registry's) killed, the workflow is
// still read by its id (Get) and listed (List, with a *PartialError naming
// the queue not read); an id found in no queue read is that error, not
// ErrNotFound.
func TestWorkflowViewsWithAQueuesMasterDown(t *testing.T) {
	ctx := context.Background()
	d := startMasterDown(t)
	e := d.env
	live, lost := d.live, d.lost
	if _, err := workflow.Enqueue(ctx, e.client, workflow.New("other").Add("a", step("a"), workflow.Options(jobs.Queue(lost)))); err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").Add("a", step("a"), workflow.Options(jobs.Queue(live))))
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	if st, err := workflow.Get(ctx, e.client, res.ID); err != nil || st.ID != res.ID {
		t.Fatalf("Get with another queue's master down = %+v, %v", st, err)
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	d.partial("List", err)
	if len(list) != 1 || list[0].ID != res.ID {
		t.Fatalf("List with %s's master down = %v, want the workflow of %s", lost, list, live)
	}
	_, err = workflow.Get(ctx, e.client, "wf-no-such-workflow")
	d.partial("Get of no workflow", err)
}

// TestWorkflowViewsWithAStepsMasterDown: with the master holding a step of
// a workflow (not its home) killed, List still lists it and the others,
// and Get still reads it: each with its steps read, the step not read in
// state StepUnreachable and not counted done, with a *PartialError naming
// the step's queue.
func TestWorkflowViewsWithAStepsMasterDown(t *testing.T) {
	ctx := context.Background()
	d := startMasterDown(t)
	e := d.env
	live, lost := d.live, d.lost
	split, err := workflow.Enqueue(ctx, e.client, workflow.New("split").
		Add("a", step("a"), workflow.Options(jobs.Queue(live))).
		Add("b", step("b", "a"), workflow.Options(jobs.Queue(lost))))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := workflow.Enqueue(ctx, e.client, workflow.New("whole").Add("a", step("a"), workflow.Options(jobs.Queue(live))))
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	check := func(what string, st *workflow.Status) {
		t.Helper()
		if st == nil || st.ID != split.ID || len(st.Steps) != 2 || st.Steps[0].State != jobs.Pending ||
			st.Steps[1].State != workflow.StepUnreachable || st.Done != 0 || st.Total != 2 || st.State != workflow.Running {
			t.Fatalf("%s with %s's master down = %+v, want split with step b unreachable", what, lost, st)
		}
	}
	st, err := workflow.Get(ctx, e.client, split.ID)
	d.partial("Get", err)
	check("Get", st)
	list, err := workflow.List(ctx, e.client, 0, 10)
	d.partial("List", err)
	// two workflows enqueued in one millisecond are listed in either order
	if len(list) == 2 && list[1].ID == whole.ID {
		list[0], list[1] = list[1], list[0]
	}
	if len(list) != 2 || list[0].ID != whole.ID {
		t.Fatalf("List with %s's master down = %v, want both workflows", lost, list)
	}
	check("List", list[1])
}

// masterDown is a cluster whose master holding queue lost is killed by
// kill, leaving queue live and the namespace's registry on another.
type masterDown struct {
	env        *env
	live, lost string
	kill       func()
	// hang stops lost's master without closing its connections (SIGSTOP,
	// resumed at cleanup): its reads time out.
	hang func()
	// partial fails the test unless err is a *PartialError naming lost.
	partial func(what string, err error)
}

func startMasterDown(t *testing.T) *masterDown {
	t.Helper()
	cl := redistest.StartCluster(t)
	rdb, master := cl.Degradable()
	// The registry on one master, queue live on it too, queue lost on
	// another, not holding the partition registry either (which every
	// enqueue reads).
	ns := redistest.Namespace(t)
	home, parts := master(ns+":queues"), master(ns+":partitions")
	var live, lost string
	for i := 0; (live == "" || lost == "") && i < 1000; i++ {
		q := fmt.Sprintf("wfq%d", i)
		switch m := master(ns + ":{" + q + "}:pending"); {
		case m == home && live == "":
			live = q
		case m != home && m != parts && lost == "":
			lost = q
		}
	}
	if live == "" || lost == "" {
		t.Fatal("no layout to test")
	}
	victim := master(ns + ":{" + lost + "}:pending")
	return &masterDown{env: newEnvOn(t, rdb, ns), live: live, lost: lost,
		kill: func() {
			for _, n := range cl.Nodes {
				if n.Addr == victim {
					n.Kill()
				}
			}
		},
		hang: func() {
			for _, n := range cl.Nodes {
				if n.Addr == victim {
					n.Pause()
					t.Cleanup(n.Resume)
				}
			}
		},
		partial: func(what string, err error) {
			t.Helper()
			var pe *jobs.PartialError
			if !errors.As(err, &pe) || errors.Is(err, workflow.ErrNotFound) || len(pe.Unreachable) != 1 || pe.Unreachable[0] != lost {
				t.Fatalf("%s with %s's master down: %v, want a *PartialError naming %s", what, lost, err, lost)
			}
		}}
}

// TestUnreachableStepCountsItsRecordedEnd: a step whose job could not be
// read (its master down) after the maintenance leader recorded its end
// counts as that end: done, and in the workflow's state.
func TestUnreachableStepCountsItsRecordedEnd(t *testing.T) {
	ctx := context.Background()
	d := startMasterDown(t)
	e := d.env
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("split").
		Add("a", step("a"), workflow.Options(jobs.Queue(d.live))).
		Add("b", step("b", "a"), workflow.After("a"), workflow.Options(jobs.Queue(d.lost))))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.run(false, nil, func(p *worker.Pool) error { return worker.Register(p, jobs.WorkFunc[Step](e.work)) }, d.live, d.lost)
	e.wait(res, "b", jobs.Succeeded)
	stop()
	if _, _, _, err := e.ledger.SettleWorkflow(ctx, res.Home, res.ID, "test"); err != nil { // records the steps' ends
		t.Fatal(err)
	}
	d.kill()
	st, err := workflow.Get(ctx, e.client, res.ID)
	d.partial("Get", err)
	if st == nil || st.Steps[1].State != workflow.StepUnreachable || st.Done != 2 || st.State != workflow.Succeeded {
		t.Fatalf("Get with %s's master down = %+v, want succeeded, 2/2 done, step b unreachable", d.lost, st)
	}
}

// TestDeduplicatedEnqueueWithAQueuesMasterDown: enqueueing a workflow
// again by its operation id, with another queue's master down, returns the
// first workflow (found in its home, which answers) instead of failing
// with jobs.ErrEnqueueUnknown until that master is back.
func TestDeduplicatedEnqueueWithAQueuesMasterDown(t *testing.T) {
	ctx := context.Background()
	d := startMasterDown(t)
	e := d.env
	w := func() *workflow.Workflow {
		return workflow.New("order").Add("a", step("a"), workflow.Options(jobs.Queue(d.live))).
			Add("b", step("b"), workflow.After("a"), workflow.Options(jobs.Queue(d.live)))
	}
	if _, err := workflow.Enqueue(ctx, e.client, workflow.New("other").Add("a", step("a"), workflow.Options(jobs.Queue(d.lost)))); err != nil {
		t.Fatal(err)
	}
	first, err := workflow.Enqueue(ctx, e.client, w(), workflow.OperationID("order-7"))
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	again, err := workflow.Enqueue(ctx, e.client, w(), workflow.OperationID("order-7"))
	if err != nil || !again.Deduplicated || again.ID != first.ID || again.Home != first.Home || again.Steps["b"] != first.Steps["b"] {
		t.Fatalf("Enqueue again with %s's master down = %+v, %v, want the first workflow %+v", d.lost, again, err, first)
	}
}
