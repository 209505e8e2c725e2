package workflow_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// failCommit fails the home queue's wf_enqueue call (the commit) without
// sending it, as a client dying between a workflow's calls would leave it.
type failCommit struct{ on atomic.Bool }

func (f *failCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
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

func (f *failCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestWorkflowNeverCommittedIsCancelled: an enqueue without an operation
// id wrote its steps of another queue, then its commit never came. The
// steps do not wait forever: past the grace the maintenance leader cancels
// them ("never committed") and records the workflow cancelled, as
// workflow.Get shows it.
func TestWorkflowNeverCommittedIsCancelled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hook := &failCommit{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	w := workflow.New("half").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))).
		Add("audit", step("audit"), workflow.Options(jobs.Queue("wf-other")))
	if _, err := workflow.Enqueue(ctx, e.client, w); err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	// the same with an operation id, never retried within the grace
	if _, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("half:op")); err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	hook.on.Store(false)
	waiting, err := e.rdb.ZRange(ctx, e.ns+":{wf-other}:waiting", 0, -1).Result()
	if err != nil || len(waiting) != 4 {
		t.Fatalf("steps left waiting in the other queue: %v, %v", waiting, err)
	}
	sum := sha256.Sum256([]byte("half:op"))
	opID := "wf-" + hex.EncodeToString(sum[:16]) // the id Enqueue derives from the operation id
	var opSteps []string
	for _, jid := range waiting {
		if strings.HasPrefix(jid, opID+".") {
			opSteps = append(opSteps, jid)
		}
	}
	if len(opSteps) != 2 {
		t.Fatalf("steps of the workflow with an operation id: %v", opSteps)
	}
	// a workflow committed across the same queues is not touched
	ok, err := workflow.Enqueue(ctx, e.client, workflow.New("whole").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))))
	if err != nil {
		t.Fatal(err)
	}
	waiting = slices.DeleteFunc(waiting, func(jid string) bool { return slices.Contains(opSteps, jid) })
	id, _, _ := strings.Cut(waiting[0], ".")
	if _, err := workflow.Get(ctx, e.client, id); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("workflow %s before the grace: %v, want not found", id, err)
	}

	e.grace = time.Millisecond
	e.start("wf-home", "wf-other")
	for _, jid := range waiting {
		r := jobstest.WaitStateWithin(t, e.ledger, "wf-other", jid, jobs.Cancelled, 2*testsignal.DefaultTimeout)
		if !strings.Contains(r.Reason, "never committed") {
			t.Fatalf("step %s cancelled with reason %q, want it to say never committed", jid, r.Reason)
		}
	}
	st := e.status(id)
	if st.State != workflow.Cancelled || st.Total != 2 || st.Done != 2 || !strings.Contains(st.CancelledBy, "never committed") {
		t.Fatalf("workflow after the grace: %+v", st)
	}
	// settled and counted like any workflow
	key := e.ns + ":{wf-home}:wf:" + id
	if err := redistest.Wait(e.rdb, key, testsignal.DefaultTimeout, func() bool {
		return e.rdb.HGet(ctx, key, "final").Val() == workflow.Cancelled
	}); err != nil {
		t.Fatalf("workflow never settled: %v", err)
	}
	for _, jid := range opSteps {
		jobstest.WaitState(t, e.ledger, "wf-other", jid, jobs.Cancelled)
	}
	// an enqueue retried late returns the workflow, cancelled: it never
	// commits the steps cancelled meanwhile
	again, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("half:op"))
	if err != nil || !again.Deduplicated || again.ID != opID {
		t.Fatalf("enqueue retried after the grace: %+v, %v", again, err)
	}
	if st := e.status(again.ID); st.State != workflow.Cancelled {
		t.Fatalf("workflow retried after the grace: %+v", st)
	}
	e.wait(ok, "ship", jobs.Succeeded)
	if st := e.status(ok.ID); st.State != workflow.Succeeded {
		t.Fatalf("committed workflow: %+v", st)
	}
	if n := e.rdb.ZCard(ctx, e.ns+":{wf-other}:wf_parts").Val(); n != 0 {
		t.Fatalf("%d workflow parts left noted", n)
	}
}

// holdCommit holds the home queue's wf_enqueue call until release is
// closed, after sending the workflow's id to reached.
type holdCommit struct {
	reached chan string
	release chan struct{}
}

func (h *holdCommit) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdCommit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() == "fcall" {
			if fn, _ := args[1].(string); strings.Contains(fn, "wf_enqueue") {
				if i := slices.Index(args, any("home")); i > 0 {
					h.reached <- args[i-1].(string)
					<-h.release
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *holdCommit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLateCommitOfAnAbandonedWorkflowWritesNothing: a client stalled
// between its part call and its commit past the grace finds the workflow
// abandoned: its commit is deduplicated against the record the leader
// wrote, so no home step is written next to the cancelled ones.
func TestLateCommitOfAnAbandonedWorkflowWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hook := &holdCommit{reached: make(chan string, 1), release: make(chan struct{})}
	e.rdb.(*redis.Client).AddHook(hook)
	e.grace = time.Millisecond
	e.start("wf-home", "wf-other")
	type result struct {
		res *workflow.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := workflow.Enqueue(ctx, e.client, workflow.New("late").
			Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
			Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))))
		done <- result{res, err}
	}()
	id := <-hook.reached
	jobstest.WaitState(t, e.ledger, "wf-other", id+".ship", jobs.Cancelled)
	close(hook.release)
	got := <-done
	if got.err != nil || !got.res.Deduplicated || got.res.ID != id {
		t.Fatalf("late commit: %+v, %v", got.res, got.err)
	}
	if _, err := e.ledger.Get(ctx, "wf-home", id+".charge"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("home step after a late commit: %v, want none written", err)
	}
	if st := e.status(id); st.State != workflow.Cancelled || st.Total != 1 {
		t.Fatalf("workflow after a late commit: %+v", st)
	}
}

// TestFinishedWorkflowPastRetentionIsNotAbandoned: a workflow committed
// across queues that finished, and whose record and steps expired (a
// retention shorter than the grace), is not taken for one never committed:
// its noted parts are forgotten, nothing is reported abandoned and no
// record is written for it again.
func TestFinishedWorkflowPastRetentionIsNotAbandoned(t *testing.T) {
	rdb, ns := redistest.New(t)
	e := newEnvWith(t, rdb, ns, time.Second)
	e.grace = time.Hour
	ctx := context.Background()
	res, err := workflow.Enqueue(ctx, e.client, workflow.New("whole").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))))
	if err != nil {
		t.Fatal(err)
	}
	e.start("wf-home", "wf-other")
	e.wait(res, "ship", jobs.Succeeded)
	record := ns + ":{wf-home}:wf:" + res.ID
	ship := e.ledger.JobKey("wf-other", res.Steps["ship"].JobID)
	if err := redistest.Wait(rdb, ns+":", testsignal.DefaultTimeout, func() bool {
		return rdb.Exists(ctx, record, ship).Val() == 0
	}); err != nil {
		t.Fatalf("the finished workflow never expired: %v", err)
	}
	ids, err := e.ledger.AbandonUncommitted(ctx, []string{"wf-home", "wf-other"}, time.Now().Add(time.Hour))
	if err != nil || len(ids) != 0 {
		t.Fatalf("AbandonUncommitted = %v, %v: a committed workflow taken for one never committed", ids, err)
	}
	if n := rdb.Exists(ctx, record).Val(); n != 0 {
		t.Fatalf("a record was written again for the expired workflow: %v", rdb.HGetAll(ctx, record).Val())
	}
	if n := rdb.ZCard(ctx, ns+":{wf-other}:wf_parts").Val(); n != 0 {
		t.Fatalf("%d workflow parts left noted", n)
	}
}

// TestAbandonedWorkflowListsStepsBeyondABatch: one queue holds more noted
// parts, all older, than one pass looks at, so the pass reaches a workflow
// never committed through its part in another queue only. Its record must
// still list, and the pass cancel, its steps in both queues.
func TestAbandonedWorkflowListsStepsBeyondABatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hook := &failCommit{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	_, err := workflow.Enqueue(ctx, e.client, workflow.New("wide").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-a"))).
		Add("audit", step("audit"), workflow.Options(jobs.Queue("wf-b"))))
	if err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	hook.on.Store(false)
	ids := e.rdb.HKeys(ctx, e.ns+":{wf-b}:wf_part").Val()
	if len(ids) != 1 {
		t.Fatalf("parts noted in wf-b: %v", ids)
	}
	id := ids[0]
	// 1000 older parts in wf-a (of workflows whose steps are gone): a
	// pass's batch there ends before the workflow's part.
	pipe := e.rdb.Pipeline()
	for i := range 1000 {
		old := fmt.Sprintf("wf-old-%d", i)
		pipe.HSet(ctx, e.ns+":{wf-a}:wf_part", old, `{"home":"wf-home","ids":["`+old+`.x"]}`)
		pipe.ZAdd(ctx, e.ns+":{wf-a}:wf_parts", redis.Z{Score: 1, Member: old})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.ledger.AbandonUncommitted(ctx, []string{"wf-home", "wf-a", "wf-b"}, time.Now().Add(time.Hour))
	if err != nil || !slices.Equal(got, []string{id}) {
		t.Fatalf("AbandonUncommitted = %v, %v; want [%s]", got, err, id)
	}
	if st := e.status(id); st.State != workflow.Cancelled || st.Total != 2 {
		t.Fatalf("abandoned workflow lists %d steps (%+v), want its 2", st.Total, st)
	}
	for q, jid := range map[string]string{"wf-a": id + ".ship", "wf-b": id + ".audit"} {
		if r, err := e.ledger.Get(ctx, q, jid); err != nil || r.State != jobs.Cancelled {
			t.Fatalf("step %s after the pass: %+v, %v; want cancelled", jid, r, err)
		}
	}
	if n := e.rdb.HLen(ctx, e.ns+":{wf-a}:wf_part").Val(); n != 0 {
		t.Fatalf("%d parts left noted in wf-a", n)
	}
}

// TestStepsOfAnotherGraphLeftByAnUncommittedTryAreCancelled: a try whose
// commit failed wrote its steps of another queue; the retry, with the same
// operation id but a graph without one of them ("audit"), commits. The
// step only the failed try had waits for a start nothing will give: past
// the grace the maintenance leader cancels it, and the committed workflow
// runs to its end.
func TestStepsOfAnotherGraphLeftByAnUncommittedTryAreCancelled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hook := &failCommit{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	first := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))).
		Add("audit", step("audit"), workflow.Options(jobs.Queue("wf-other")))
	if _, err := workflow.Enqueue(ctx, e.client, first, workflow.OperationID("order:1")); err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	hook.on.Store(false)
	retry := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other")))
	res, err := workflow.Enqueue(ctx, e.client, retry, workflow.OperationID("order:1"))
	if err != nil || res.Deduplicated {
		t.Fatalf("retry with another graph: %+v, %v", res, err)
	}
	stray := res.ID + ".audit"
	if r, err := e.ledger.Get(ctx, "wf-other", stray); err != nil || r.State != jobs.Waiting {
		t.Fatalf("the failed try's audit step: %+v, %v; want it waiting", r, err)
	}

	e.grace = time.Millisecond
	e.start("wf-home", "wf-other")
	r := jobstest.WaitStateWithin(t, e.ledger, "wf-other", stray, jobs.Cancelled, 2*testsignal.DefaultTimeout)
	if !strings.Contains(r.Reason, "never committed") {
		t.Fatalf("stray step cancelled with reason %q", r.Reason)
	}
	e.wait(res, "ship", jobs.Succeeded)
	if st := e.status(res.ID); st.State != workflow.Succeeded || st.Total != 2 {
		t.Fatalf("committed workflow: %+v", st)
	}
	key := e.ns + ":{wf-other}:wf_parts"
	if err := redistest.Wait(e.rdb, key, testsignal.DefaultTimeout, func() bool { return e.rdb.ZCard(ctx, key).Val() == 0 }); err != nil {
		t.Fatalf("workflow parts left noted: %v", err)
	}
}

// TestRetryCommittedInAnotherHomePartitionIsNotAbandoned: the home queue
// is partitioned and its partition count changes between a try whose
// commit failed and the retry, which commits in another partition (the
// try's claim of its home expired). The
// failed try's notes name the old one, where no record is: the workflow
// is not abandoned there, its steps are not cancelled, and it runs to its
// end.
func TestRetryCommittedInAnotherHomePartitionIsNotAbandoned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "wf-home", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	hook := &failCommit{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	w := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other")))
	if _, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order:moved")); err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	hook.on.Store(false)
	sum := sha256.Sum256([]byte("order:moved"))
	id := "wf-" + hex.EncodeToString(sum[:16])
	var noted struct{ Home string }
	raw, err := e.rdb.HGet(ctx, e.ns+":{wf-other}:wf_part", id).Result()
	if err != nil || json.Unmarshal([]byte(raw), &noted) != nil || !ledger.IsPartition(noted.Home) {
		t.Fatalf("the failed try's part note: %q, %v", raw, err)
	}
	// a layout in which the workflow's home is another partition
	p := 3
	for ledger.PartitionNames("wf-home", p)[ledger.RoutePartition(p, id, "", 0)] == noted.Home {
		p++
	}
	if _, err := e.client.SetPartitions(ctx, "wf-home", p, "test", ""); err != nil {
		t.Fatal(err)
	}
	// the failed try's claim of its home gone (expired): the retry
	// commits where the new layout routes it
	if err := e.rdb.Del(ctx, e.ns+":{wf-home}:wfhome:order:moved").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order:moved"))
	if err != nil || res.Deduplicated || res.ID != id || res.Home == noted.Home {
		t.Fatalf("retry in the new layout: %+v, %v (noted home %s)", res, err, noted.Home)
	}
	qs, err := e.ledger.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.ledger.AbandonUncommitted(ctx, qs, time.Now().Add(time.Hour))
	if err != nil || len(got) != 0 {
		t.Fatalf("AbandonUncommitted = %v, %v: the committed workflow abandoned", got, err)
	}
	ship := res.Steps["ship"]
	if r, err := e.ledger.Get(ctx, ship.Queue, ship.JobID); err != nil || r.State != jobs.Waiting {
		t.Fatalf("the committed workflow's ship step: %+v, %v; want it waiting", r, err)
	}
	if n := e.rdb.Exists(ctx, e.ns+":{"+noted.Home+"}:wf:"+id).Val(); n != 0 {
		t.Fatalf("a record written in the old home %s", noted.Home)
	}
	if n := e.rdb.ZCard(ctx, e.ns+":{wf-other}:wf_parts").Val(); n != 0 {
		t.Fatalf("%d workflow parts left noted", n)
	}
	e.start("wf-home", "wf-other")
	e.wait(res, "ship", jobs.Succeeded)
	if st := e.status(res.ID); st.State != workflow.Succeeded {
		t.Fatalf("committed workflow: %+v", st)
	}
}

// TestUnreadableCommittedRecordForgetsItsParts: a committed workflow whose
// record's definition does not parse fails no pass of AbandonUncommitted:
// it is logged, with the workflow's id, and its part notes are forgotten
// instead of being read again on every pass.
func TestUnreadableCommittedRecordForgetsItsParts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hook := &failCommit{}
	e.rdb.(*redis.Client).AddHook(hook)
	hook.on.Store(true)
	w := workflow.New("order").
		Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
		Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other")))
	if _, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order:bad")); err == nil {
		t.Fatal("enqueue whose commit failed: no error")
	}
	hook.on.Store(false)
	res, err := workflow.Enqueue(ctx, e.client, w, workflow.OperationID("order:bad"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ns+":{wf-home}:wf:"+res.ID, "def", "{not json").Err(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	l := ledger.New(e.rdb, ledger.Config{Namespace: e.ns,
		Logger: slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &logs}, nil))})
	for pass := range 2 {
		if got, err := l.AbandonUncommitted(ctx, []string{"wf-home", "wf-other"}, time.Now().Add(time.Hour)); err != nil || len(got) != 0 {
			t.Fatalf("pass %d: AbandonUncommitted = %v, %v", pass, got, err)
		}
	}
	if n := e.rdb.ZCard(ctx, e.ns+":{wf-other}:wf_parts").Val(); n != 0 {
		t.Fatalf("%d workflow parts left noted", n)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if strings.Count(out, `"level":"ERROR"`) != 1 || !strings.Contains(out, `"workflow":"`+res.ID+`"`) {
		t.Fatalf("logs %s: want one error naming workflow %s", out, res.ID)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// TestUncommittedGraceIsOnTheNamespacesTime: a workflow's parts are
// noted at the namespace's time, and the grace is measured by it too: a
// leader whose clock is ahead of that time (here Redis's clock is two
// hours behind the pools') does not abandon a workflow whose commit is on
// its way.
func TestUncommittedGraceIsOnTheNamespacesTime(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	srv.SetClockOffset(-2 * time.Hour)
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	ctx := context.Background()
	hook := &holdCommit{reached: make(chan string, 1), release: make(chan struct{})}
	rdb.AddHook(hook)
	e.grace = time.Hour
	e.start("wf-home", "wf-other")
	done := make(chan error, 1)
	go func() {
		_, err := workflow.Enqueue(ctx, e.client, workflow.New("held").
			Add("charge", step("charge"), workflow.Options(jobs.Queue("wf-home"))).
			Add("ship", step("ship", "charge"), workflow.After("charge"), workflow.Options(jobs.Queue("wf-other"))))
		done <- err
	}()
	id := <-hook.reached
	// A part noted long ago on any clock: its removal shows a hand-over
	// pass looked after the held workflow's part was noted.
	parts := e.ns + ":{wf-other}:wf_parts"
	if err := rdb.ZAdd(ctx, parts, redis.Z{Score: 1, Member: "ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Await(t, rdb, e.ns, "the ghost part forgotten", func() bool {
		return rdb.ZScore(ctx, parts, "ghost").Err() == redis.Nil
	})
	close(hook.release)
	if err := <-done; err != nil {
		t.Fatalf("commit: %v", err)
	}
	if st := e.status(id); st.State == workflow.Cancelled {
		t.Fatalf("the workflow was abandoned while its commit was on its way: %+v", st)
	}
}
