package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

func diamond() *workflow.Workflow {
	return workflow.New("order").
		Add("charge", step("charge")).
		Add("reserve", step("reserve", "charge"), workflow.After("charge")).
		Add("invoice", step("invoice", "charge"), workflow.After("charge")).
		Add("ship", step("ship", "reserve", "invoice"), workflow.After("reserve", "invoice"))
}

func TestValidateRefusesBadGraphsAndWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	big := workflow.New("big")
	for i := range workflow.MaxSteps + 1 {
		big.Add(fmt.Sprintf("s%d", i), step("x"))
	}
	cases := map[string]*workflow.Workflow{
		"empty":          workflow.New("x"),
		"cycle":          workflow.New("x").Add("a", step("a"), workflow.After("b")).Add("b", step("b"), workflow.After("a")),
		"self":           workflow.New("x").Add("a", step("a"), workflow.After("a")),
		"unknown dep":    workflow.New("x").Add("a", step("a"), workflow.After("nope")),
		"duplicate":      workflow.New("x").Add("a", step("a")).Add("a", step("a")),
		"bad name":       workflow.New("x").Add("a b", step("a")),
		"allow, no dep":  workflow.New("x").Add("a", step("a")).Add("b", step("b"), workflow.AllowFailure("a")),
		"bad step queue": workflow.New("x").Add("a", step("a"), workflow.Options(jobs.Queue("no spaces"))),
		"too many":       big,
		"unique step":    workflow.New("x").Add("a", step("a"), workflow.Options(jobs.Unique(jobs.UniqueOpts{ByArgs: true}))),
		"grouped step":   workflow.New("x").Add("a", step("a"), workflow.Options(jobs.Group("acme"))),
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			if err := w.Validate(); !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Validate: %v, want ErrInvalid", err)
			}
			if _, err := workflow.Enqueue(ctx, e.client, w); !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Enqueue: %v, want ErrInvalid", err)
			}
		})
	}
	n, err := redistest.CountKeys(ctx, e.rdb)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := e.rdb.Keys(ctx, "*"+e.ns+"*").Result()
	if len(keys) != 0 {
		t.Fatalf("refused workflows wrote %d keys (of %d): %v", len(keys), n, keys)
	}
}

// TestDiamond: charge → (reserve, invoice) → ship, each step once, in
// dependency order, each reading its dependencies' outputs.
func TestDiamond(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-1"))
	if err != nil {
		t.Fatal(err)
	}
	// nothing runs but the root until it succeeds
	if st := e.status(res.ID); st.Steps[3].State != "waiting" || st.Steps[0].State != jobs.Pending {
		t.Fatalf("before any pool: %+v", st.Steps)
	}
	e.start()
	e.wait(res, "ship", jobs.Succeeded)
	for _, s := range []string{"charge", "reserve", "invoice", "ship"} {
		if n := e.runs.count(s); n != 1 {
			t.Errorf("step %s ran %d times, want 1", s, n)
		}
	}
	if e.runs.index("charge") != 0 || e.runs.index("ship") != 3 {
		t.Errorf("order %v: charge first and ship last", e.runs.order)
	}
	var out StepOut
	if err := e.client.Output(ctx, res.Steps["ship"].Queue, res.Steps["ship"].JobID, &out); err != nil {
		t.Fatal(err)
	}
	if out.Seen["reserve"] != 2 || out.Seen["invoice"] != 2 || out.N != 3 {
		t.Fatalf("ship's output %+v: it read reserve's and invoice's outputs (n = 2 each)", out)
	}
	st := e.status(res.ID)
	if st.State != workflow.Succeeded || st.Done != 4 || st.Total != 4 || st.Name != "order" {
		t.Fatalf("status %+v", st)
	}
	if string(st.Steps[0].Output) == "" || st.Steps[0].Token == 0 {
		t.Fatalf("step charge shows no output or token: %+v", st.Steps[0])
	}
	// the maintenance leader counts it started and finished, once: it marks
	// the record final, then counts, and its later passes write under the
	// namespace, so each is a moment to look at the counter again
	wk := e.ns + ":{default}:wf:" + res.ID
	redistest.Await(t, e.rdb, e.ns, "the workflow's outcome counted", func() bool {
		return e.rdb.HGet(ctx, wk, "final").Val() == workflow.Succeeded &&
			counter(t, e.reg, "fencedq_workflows_finished_total", "succeeded") > 0
	})
	if n := counter(t, e.reg, "fencedq_workflows_started_total", ""); n != 1 {
		t.Fatalf("workflows started %v, want 1", n)
	}
	if n := counter(t, e.reg, "fencedq_workflows_finished_total", "succeeded"); n != 1 {
		t.Fatalf("workflows finished succeeded %v, want 1", n)
	}
}

// TestEnqueueTwice: the same operation id is one workflow.
func TestEnqueueTwice(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-2"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-2"))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Deduplicated || a.Deduplicated || a.ID != b.ID || b.Steps["ship"] != a.Steps["ship"] {
		t.Fatalf("first %+v, second %+v: want the second deduplicated to the first", a, b)
	}
	e.start()
	e.wait(a, "ship", jobs.Succeeded)
	if n := e.runs.count("charge"); n != 1 {
		t.Fatalf("charge ran %d times", n)
	}
	list, err := workflow.List(ctx, e.client, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("list: %d workflows, want the one", len(list))
	}
}

// TestFanOutFanIn: 1 → 200 → 1; the join runs once, after all 200, and
// reads all their outputs.
func TestFanOutFanIn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 200
	w := workflow.New("fan").Add("split", step("split"))
	var mids []string
	for i := range n {
		name := fmt.Sprintf("page-%d", i)
		mids = append(mids, name)
		w.Add(name, step(name, "split"), workflow.After("split"))
	}
	w.Add("join", step("join", mids...), workflow.After(mids...))
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	// 202 steps through one pool of 8 slots, the join reading 200 outputs:
	// longer than one job's bound on a loaded machine under -race
	ref := res.Steps["join"]
	jobstest.WaitStateWithin(t, e.ledger, ref.Queue, ref.JobID, jobs.Succeeded, time.Minute)
	if c := e.runs.count("join"); c != 1 {
		t.Fatalf("join ran %d times", c)
	}
	for _, m := range mids {
		if c := e.runs.count(m); c != 1 {
			t.Fatalf("%s ran %d times", m, c)
		}
	}
	if e.runs.index("join") != n+1 {
		t.Fatalf("join started at %d, want after all %d", e.runs.index("join"), n+1)
	}
	var out StepOut
	if err := e.client.Output(ctx, res.Steps["join"].Queue, res.Steps["join"].JobID, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Seen) != n {
		t.Fatalf("join read %d outputs, want %d", len(out.Seen), n)
	}
}

// TestFailureCancelsDependentsUnlessAllowed: a dead step cancels what
// depends on it (and on down), with the reason; a step that allows it to
// fail runs.
func TestFailureCancelsDependentsUnlessAllowed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bad := step("charge")
	bad.Fail = true
	w := workflow.New("fail").
		Add("charge", bad).
		Add("reserve", step("reserve"), workflow.After("charge")).
		Add("ship", step("ship"), workflow.After("reserve")).
		Add("notify", step("notify"), workflow.After("charge"), workflow.AllowFailure("charge"))
	res, err := workflow.Enqueue(ctx, e.client, w)
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "charge", jobs.Dead)
	r := e.wait(res, "reserve", jobs.Cancelled)
	if r.Reason != "dependency charge ended dead" {
		t.Fatalf("reserve's reason %q", r.Reason)
	}
	if r := e.wait(res, "ship", jobs.Cancelled); r.Reason != "dependency reserve ended cancelled" {
		t.Fatalf("ship's reason %q", r.Reason)
	}
	e.wait(res, "notify", jobs.Succeeded)
	if e.runs.count("reserve")+e.runs.count("ship") != 0 {
		t.Fatal("a cancelled step ran")
	}
	if st := e.status(res.ID); st.State != workflow.Failed || st.Done != 4 {
		t.Fatalf("status %s %d/%d", st.State, st.Done, st.Total)
	}
}

// TestRerunResumes: an operator's re-run of the failed step puts the
// steps its failure cancelled back to waiting, and the workflow finishes.
func TestRerunResumes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("rerun").
		Add("charge", Step{Name: "charge", Fail: true}).
		Add("reserve", step("reserve", "charge"), workflow.After("charge")).
		Add("ship", step("ship", "reserve"), workflow.After("reserve")))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.start()
	e.wait(res, "ship", jobs.Cancelled)
	stop()
	e.fixed.Store(true) // the operator fixed the cause (the handler fails no more)
	ref := res.Steps["charge"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "ada", "card fixed"); err != nil {
		t.Fatal(err)
	}
	if r := e.wait(res, "ship", "waiting"); r.Reason != "" {
		t.Fatalf("ship back to waiting keeps reason %q", r.Reason)
	}
	e.start()
	e.wait(res, "ship", jobs.Succeeded)
	if st := e.status(res.ID); st.State != workflow.Succeeded {
		t.Fatalf("status %s", st.State)
	}
}

// TestCancel: cancelling a workflow cancels its waiting and pending steps.
func TestCancel(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond())
	if err != nil {
		t.Fatal(err)
	}
	st, err := workflow.Cancel(ctx, e.client, res.ID, "ada", "customer left")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflow.Cancelled || st.Done != 4 {
		t.Fatalf("after cancel: %s %d/%d %+v", st.State, st.Done, st.Total, st.Steps)
	}
	for _, s := range st.Steps {
		if s.State != jobs.Cancelled || s.Reason != "cancelled by operator:ada" {
			t.Fatalf("step %s: %s (%q)", s.Name, s.State, s.Reason)
		}
	}
	e.start()
	m, err := e.client.Enqueue(ctx, Step{Name: "marker"})
	if err != nil {
		t.Fatal(err)
	}
	// a plain job enqueued after the cancel runs; no step did
	jobstest.WaitState(t, e.ledger, m.Queue, m.JobID, jobs.Succeeded)
	if len(e.runs.order) != 1 {
		t.Fatalf("runs after cancel: %v", e.runs.order)
	}
}

// TestUncertainHoldsDependents: a step whose outcome is unknown holds its
// dependents (waiting, not cancelled) until it is resolved; resolved
// applied, they run.
func TestUncertainHoldsDependents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("unsure").
		Add("charge", Step{Name: "charge", Unknown: true}).
		Add("ship", step("ship"), workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	// nothing can tell what happened (no Reconcile, no effect log): review
	e.wait(res, "charge", jobs.Review)
	if r := e.wait(res, "ship", "waiting"); r.Attempts != 0 {
		t.Fatalf("ship ran while charge was uncertain: %+v", r)
	}
	ref := res.Steps["charge"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideSucceeded, "ada", "the bank says it was charged"); err != nil {
		t.Fatal(err)
	}
	e.wait(res, "ship", jobs.Succeeded)
	if e.runs.count("ship") != 1 || e.runs.count("charge") != 1 {
		t.Fatalf("runs %v", e.runs.order)
	}
}

// TestRerunOfADependentWaitsForItsCause: re-running a step its dependency's
// failure cancelled puts it back to waiting for that dependency, never
// straight to pending.
func TestRerunOfADependentWaitsForItsCause(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("rerun-dependent").
		Add("charge", Step{Name: "charge", Fail: true}).
		Add("ship", step("ship"), workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	stop := e.start()
	e.wait(res, "ship", jobs.Cancelled)
	stop()
	ref := res.Steps["ship"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "ada", "try again"); err != nil {
		t.Fatal(err)
	}
	e.wait(res, "ship", "waiting")
	e.fixed.Store(true)
	charge := res.Steps["charge"]
	if _, err := e.client.Resolve(ctx, charge.Queue, charge.JobID, jobs.DecideRerun, "ada", "fixed"); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "ship", jobs.Succeeded)
	if e.runs.count("ship") != 1 {
		t.Fatalf("ship ran %d times", e.runs.count("ship"))
	}
}

// TestWaitingStepsCounted: waiting steps are among the queue's counts, its
// lists by state and the maintenance leader's fencedq_jobs gauge.
func TestWaitingStepsCounted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := workflow.Enqueue(ctx, e.client, diamond()); err != nil {
		t.Fatal(err)
	}
	in := e.client.Inspector()
	c, err := in.Counts(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if c[jobs.Waiting] != 3 || c[jobs.Pending] != 1 {
		t.Fatalf("counts %v: 3 waiting, 1 pending", c)
	}
	l, err := in.List(ctx, jobs.ListParams{Queue: jobs.DefaultQueue, State: jobs.Waiting, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 3 || len(l.Jobs) != 3 {
		t.Fatalf("waiting list: %d of %d", len(l.Jobs), l.Total)
	}
	// a pool of another queue leads maintenance: its status pass sets the
	// gauge of every queue
	e.start("elsewhere")
	redistest.Await(t, e.rdb, e.ns+":reconciler:status", "the gauge of waiting steps", func() bool {
		return gauge(t, e.reg, "fencedq_jobs", map[string]string{"queue": jobs.DefaultQueue, "state": "waiting"}) == 3
	})
	if n := e.runs.count("charge"); n != 0 {
		t.Fatalf("charge ran %d times in a pool of another queue", n)
	}
}

// TestFinishedWorkflowsExpire: a finished workflow's record, operation id
// and index entries are pruned once the retention passed and its steps'
// jobs expired; enqueueing with the same operation id then makes a new
// workflow. A finished workflow with a step still kept is not pruned.
func TestFinishedWorkflowsExpire(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-expire"))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "ship", jobs.Succeeded)
	redistest.AwaitWithin(t, e.rdb, e.ns, "the workflow's record pruned", 60*time.Second, func() bool {
		_, err := workflow.Get(ctx, e.client, res.ID)
		return errors.Is(err, workflow.ErrNotFound)
	})
	p := e.ns + ":{default}:"
	if n := e.rdb.Exists(ctx, p+"wf:"+res.ID, p+"wfop:order-expire").Val(); n != 0 {
		t.Errorf("%d of the record and its operation id left", n)
	}
	for _, idx := range []string{"workflows", "wf_done"} {
		if err := e.rdb.ZScore(ctx, p+idx, res.ID).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("index %s still lists the workflow (%v)", idx, err)
		}
	}
	if e.rdb.SIsMember(ctx, p+"wf_open", res.ID).Val() {
		t.Error("still open")
	}
	again, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-expire"))
	if err != nil || again.Deduplicated {
		t.Fatalf("enqueue after expiry: %+v, %v: a new workflow", again, err)
	}
	e.wait(again, "ship", jobs.Succeeded)
	if n := e.runs.count("ship"); n != 2 {
		t.Fatalf("ship ran %d times: once per workflow", n)
	}
}

// TestFinishedWorkflowWithAKeptStepStays: the pruner keeps a finished
// workflow while any step's job is kept, and looks again a retention
// later.
func TestFinishedWorkflowWithAKeptStepStays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, diamond(), workflow.OperationID("order-kept"))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.wait(res, "ship", jobs.Succeeded)
	wk := e.ns + ":{default}:wf:" + res.ID
	redistest.Await(t, e.rdb, wk, "the workflow settled", func() bool {
		return e.rdb.HGet(ctx, wk, "final").Val() == workflow.Succeeded
	})
	later := time.Now().Add(e.ledger.Retention() + time.Hour)
	if n, err := e.ledger.PruneWorkflows(ctx, jobs.DefaultQueue, later); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) while its steps are kept", n, err)
	}
	if _, err := workflow.Get(ctx, e.client, res.ID); err != nil {
		t.Fatal(err)
	}
	// every step but ship expired: still kept, and not looked at again
	// before another retention
	for _, s := range []string{"charge", "reserve", "invoice"} {
		e.rdb.Del(ctx, e.ns+":{default}:job:"+res.Steps[s].JobID)
	}
	if n, err := e.ledger.PruneWorkflows(ctx, jobs.DefaultQueue, later.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) while ship is kept", n, err)
	}
	e.rdb.Del(ctx, e.ns+":{default}:job:"+res.Steps["ship"].JobID)
	if n, err := e.ledger.PruneWorkflows(ctx, jobs.DefaultQueue, later.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) before a retention passed since the last look", n, err)
	}
	if n, err := e.ledger.PruneWorkflows(ctx, jobs.DefaultQueue, later.Add(e.ledger.Retention()+2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the workflow", n, err)
	}
	if _, err := workflow.Get(ctx, e.client, res.ID); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("get after pruning: %v", err)
	}
}

// TestStepsOnAPartitionedQueue: the steps of a partitioned queue go to a
// partition, by default the workflow's (its id as the partition key), by
// their own partition key when they have one; the workflow runs through
// the partitions' pools, each step once, and enqueueing it again finds it.
func TestStepsOnAPartitionedQueue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "parts", 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	parts := ledger.PartitionNames("parts", 4)
	// two keys routed to different partitions: at least one differs from
	// the workflow's, so dependencies cross partitions
	keyA, keyB := "mail-0", ""
	for i := 1; keyB == ""; i++ {
		if k := fmt.Sprintf("mail-%d", i); ledger.RoutePartition(4, k, "", 0) != ledger.RoutePartition(4, keyA, "", 0) {
			keyB = k
		}
	}
	opts := workflow.Options(jobs.Queue("parts"))
	w := workflow.New("order").
		Add("charge", step("charge"), opts).
		Add("reserve", step("reserve", "charge"), workflow.After("charge"), opts).
		Add("invoice", step("invoice", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("parts"), jobs.PartitionKey(keyA))).
		Add("notify", step("notify", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("parts"), jobs.PartitionKey(keyB))).
		Add("ship", step("ship", "reserve", "invoice", "notify"), workflow.After("reserve", "invoice", "notify"), opts)
	res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order-parts"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(parts, res.Home) {
		t.Fatalf("home %s is not a partition of parts %v", res.Home, parts)
	}
	for _, s := range []string{"charge", "reserve", "ship"} {
		if q := res.Steps[s].Queue; q != res.Home {
			t.Errorf("step %s (no key) in %s, not in the workflow's partition %s", s, q, res.Home)
		}
	}
	if q, want := res.Steps["invoice"].Queue, parts[ledger.RoutePartition(4, keyA, "", 0)]; q != want {
		t.Errorf("invoice (key %s) in %s, want %s", keyA, q, want)
	}
	if q, want := res.Steps["notify"].Queue, parts[ledger.RoutePartition(4, keyB, "", 0)]; q != want {
		t.Errorf("notify (key %s) in %s, want %s", keyB, q, want)
	}
	e.start("parts")
	e.wait(res, "ship", jobs.Succeeded)
	for _, s := range []string{"charge", "reserve", "invoice", "notify", "ship"} {
		if n := e.runs.count(s); n != 1 {
			t.Errorf("step %s ran %d times", s, n)
		}
	}
	if st := e.status(res.ID); st.State != workflow.Succeeded || st.Home != res.Home {
		t.Fatalf("status %s, home %s", st.State, st.Home)
	}
	again, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order-parts"))
	if err != nil || !again.Deduplicated || again.ID != res.ID {
		t.Fatalf("enqueued again: %+v, %v", again, err)
	}
	if c, err := e.client.Inspector().Counts(ctx, "parts"); err != nil || c[jobs.Succeeded] != 5 {
		t.Fatalf("counts of parts: %v, %v", c, err)
	}
	var out StepOut
	if err := e.client.Output(ctx, res.Steps["ship"].Queue, res.Steps["ship"].JobID, &out); err != nil || out.N != 4 {
		t.Fatalf("ship's output %+v, %v: it read its 3 dependencies' outputs", out, err)
	}
}

// TestRerunReopensASettledWorkflow: a workflow the maintenance leader
// settled failed, whose failed step an operator re-runs, is running again
// and is settled again when it finishes: counted finished succeeded, its
// record final succeeded.
func TestRerunReopensASettledWorkflow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("reopen").
		Add("charge", Step{Name: "charge", Fail: true}).
		Add("ship", step("ship", "charge"), workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	wk := e.ns + ":{default}:wf:" + res.ID
	redistest.Await(t, e.rdb, e.ns, "the workflow settled failed", func() bool {
		return e.rdb.HGet(ctx, wk, "final").Val() == workflow.Failed &&
			counter(t, e.reg, "fencedq_workflows_finished_total", "failed") == 1
	})
	e.fixed.Store(true)
	ref := res.Steps["charge"]
	if _, err := e.client.Resolve(ctx, ref.Queue, ref.JobID, jobs.DecideRerun, "ada", "card fixed"); err != nil {
		t.Fatal(err)
	}
	e.wait(res, "ship", jobs.Succeeded)
	redistest.Await(t, e.rdb, e.ns, "the re-run workflow settled succeeded", func() bool {
		return e.rdb.HGet(ctx, wk, "final").Val() == workflow.Succeeded &&
			counter(t, e.reg, "fencedq_workflows_finished_total", "succeeded") == 1
	})
	if n := counter(t, e.reg, "fencedq_workflows_started_total", ""); n != 1 {
		t.Fatalf("workflows started %v, want 1", n)
	}
}

// TestWorkflowMetricsLabelTheQueueNotThePartition: a workflow whose home
// is a partitioned queue is counted started and finished under the
// queue's name, as every other metric is, never under its partition's.
func TestWorkflowMetricsLabelTheQueueNotThePartition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "parts", 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	opts := workflow.Options(jobs.Queue("parts"))
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("order").
		Add("charge", step("charge"), opts).
		Add("ship", step("ship", "charge"), workflow.After("charge"), opts))
	if err != nil {
		t.Fatal(err)
	}
	if res.Home == "parts" {
		t.Fatalf("home %s, want a partition of parts", res.Home)
	}
	e.start("parts")
	e.wait(res, "ship", jobs.Succeeded)
	redistest.Await(t, e.rdb, e.ns, "the workflow's outcome counted", func() bool {
		return counter(t, e.reg, "fencedq_workflows_finished_total", "succeeded") == 1
	})
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "fencedq_workflows_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() != "parts" {
					t.Errorf("%s{queue=%q}: want the queue, parts", mf.GetName(), l.GetValue())
				}
			}
		}
	}
}
