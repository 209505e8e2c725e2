package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type callArgs struct {
	URL string `json:"url"`
}

func (callArgs) Kind() string { return "call" }

// callWorker posts to an external service by operation id.
type callWorker struct{ calls atomic.Int32 }

func (w *callWorker) Work(ctx context.Context, j *jobs.Job[callArgs]) error {
	w.calls.Add(1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, j.Args.URL+"/effects/"+j.OperationID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func (w *callWorker) Reconcile(ctx context.Context, j *jobs.Job[callArgs]) (jobs.Verdict, error) {
	resp, err := http.Get(j.Args.URL + "/effects/" + j.OperationID)
	if err != nil {
		return jobs.CannotTell, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return jobs.Applied, nil
	case http.StatusNotFound:
		return jobs.NotApplied, nil
	}
	return jobs.CannotTell, fmt.Errorf("status %d", resp.StatusCode)
}

func TestLateAnswerEndsUncertainThenReconciledApplied(t *testing.T) {
	e := newEnv(t)
	svc := newFakeService(time.Second)
	srv := httptest.NewServer(svc)
	defer srv.Close()
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	w := &callWorker{}
	_ = worker.Register(p, jobs.Worker[callArgs](w))
	e.start(p)
	res := e.enqueue(callArgs{URL: srv.URL}, jobs.Timeout(200*time.Millisecond), jobs.OperationID("pay-1"))
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	// The resolver counts its decision after writing it.
	hooks.Decided.WaitFor("the applied verdict", func(d worker.Decision) bool { return d.JobID == res.JobID && d.Result == "applied" })
	if svc.count("pay-1") != 1 || w.calls.Load() != 1 {
		t.Fatalf("effect applied %d times, handler called %d times", svc.count("pay-1"), w.calls.Load())
	}
	h, _ := e.ledger.History(context.Background(), "default", res.JobID)
	var sawUncertain, sawDecision bool
	for _, en := range h {
		if en.Event == "end" && en.Outcome == "uncertain" && en.Reason == "deadline passed mid-call" {
			sawUncertain = true
		}
		if en.Event == "resolve" && en.Decision == "succeeded" && strings.Contains(en.Note, "applied") {
			sawDecision = true
		}
	}
	if !sawUncertain || !sawDecision || rec.Attempts != 1 {
		t.Fatalf("history lacks the uncertain attempt or the reconcile decision: %+v", h)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_reconcile_decisions_total")); v != 1 {
		t.Fatalf("decisions metric %v", v)
	}
}

type sleepyArgs struct{}

func (sleepyArgs) Kind() string { return "sleepy" }

// sleepyWorker ignores its context on the first attempt and sleeps past
// its lease; later attempts return at once.
type sleepyWorker struct {
	calls     atomic.Int32
	successes atomic.Int32
	wake      chan struct{}
	started   testsignal.Signal[int32] // the attempt's number, at its start
}

func (w *sleepyWorker) Work(ctx context.Context, j *jobs.Job[sleepyArgs]) error {
	n := w.calls.Add(1)
	w.started.Signal(n)
	if n == 1 {
		<-w.wake // ignores ctx
	}
	w.successes.Add(1)
	return nil
}

func (w *sleepyWorker) Reconcile(context.Context, *jobs.Job[sleepyArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

func TestStaleAttemptCommitIsRejected(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	w := &sleepyWorker{wake: make(chan struct{})}
	w.started.Init(t, "sleepy attempt started")
	_ = worker.Register(p, jobs.Worker[sleepyArgs](w))
	e.start(p)
	res := e.enqueue(sleepyArgs{}, jobs.Timeout(200*time.Millisecond))
	// The first attempt hangs; the lease lapses; the maintenance leader
	// expires it and the resolver re-runs it.
	w.started.WaitOrTimeoutN(2)
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	close(w.wake) // the old attempt wakes up and tries to commit
	hooks.Committed.WaitFor("the old attempt's commit, refused", func(cs []ledger.Committed) bool {
		for _, c := range cs {
			if !c.Applied {
				return true
			}
		}
		return false
	})
	if v := testutil.ToFloat64(e.metric("fencedq_fenced_rejections_total")); v != 1 {
		t.Fatalf("fenced rejections counted %v, want 1", v)
	}
	after, _ := e.ledger.Get(context.Background(), "default", res.JobID)
	if after.State != jobs.Succeeded || after.Token != rec.Token || after.Attempts != 2 {
		t.Fatalf("stale commit changed the job: %+v", after)
	}
	st, _ := e.ledger.Stats(context.Background(), "default")
	if st["fenced_commit"] != 1 || st["succeeded"] != 1 {
		t.Fatalf("stats %v", st)
	}
	if !strings.Contains(e.logs.String(), "commit rejected") {
		t.Fatal("stale commit not logged")
	}
}

// crashAt enqueues an effect job with operation id op, runs a helper
// worker process in mode until it pushes its first entry to the list
// ns:test:<mark>, SIGKILLs it there, and starts a pool to recover. It
// returns the test's env, the job, that entry and the pool's hooks.
func crashAt(t *testing.T, mode, mark, op string) (*env, *jobs.Result, string, worker.Hooks) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	e := newEnvOn(t, rdb, ns)
	ctx := context.Background()
	res := e.enqueue(effectArgs{Name: op}, jobs.OperationID(op))
	helper := startHelper(t, mode, srv.Addr, ns)
	list := ns + ":test:" + mark
	// A helper process starts (a test binary under the race detector) and
	// claims the job: more than the default bound on a loaded machine.
	redistest.AwaitWithin(t, rdb, list, "the helper's "+mark+" report", 30*time.Second, func() bool { return rdb.LLen(ctx, list).Val() == 1 })
	entry := rdb.LIndex(ctx, list, 0).Val()
	_ = helper.Process.Signal(syscall.SIGKILL)
	_, _ = helper.Process.Wait()

	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	_ = worker.Register(p, jobs.Worker[effectArgs](&effectWorker{rdb: rdb, ns: ns}))
	e.start(p)
	return e, res, entry, hooks
}

// applies returns how many times operation op's effect was applied.
func (e *env) applies(op string) string {
	return e.rdb.HGet(context.Background(), e.ns+":test:{fx}:applies", op).Val()
}

func TestKilledBeforeEffectIsRerunOnceWithHigherToken(t *testing.T) {
	e, res, first, _ := crashAt(t, "block-before-effect", "started", "op-kill-1")
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	if n := e.applies("op-kill-1"); n != "1" {
		t.Fatalf("effect applied %s times", n)
	}
	tok, _ := lease.ParseToken(strings.Split(first, "/")[1])
	// found not applied, the attempt failed: a retry on the same run
	if rec.Token <= tok || rec.Attempts != 2 || rec.Runs != 0 {
		t.Fatalf("re-run: token %d (first %d), attempts %d, runs %d", rec.Token, tok, rec.Attempts, rec.Runs)
	}
}

// decisions returns the decisions about uncertain jobs counted with result.
func decisions(t *testing.T, e *env, result string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "fencedq_reconcile_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestKilledAfterEffectIsReconciledNotReapplied(t *testing.T) {
	e, res, _, hooks := crashAt(t, "block-after-effect", "effect-done", "op-kill-2")
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	// Both decisions are counted (by the expirer, then the resolver) after
	// they were written.
	for seen := map[string]bool{}; !seen["expired"] || !seen["applied"]; {
		seen[hooks.Decided.WaitFor("a decision about the job", func(d worker.Decision) bool { return d.JobID == res.JobID }).Result] = true
	}
	if n := e.applies("op-kill-2"); n != "1" {
		t.Fatalf("effect applied %s times", n)
	}
	if rec.Attempts != 1 || e.rdb.LLen(context.Background(), e.ns+":test:started").Val() != 1 {
		t.Fatalf("job ran again: attempts %d", rec.Attempts)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_attempts_expired_total")); v != 1 {
		t.Fatalf("expired attempts = %v, want 1", v)
	}
	if v := decisions(t, e, "applied"); v != 1 {
		t.Fatalf("applied decisions = %v, want 1", v)
	}
}

type opaqueArgs struct{}

func (opaqueArgs) Kind() string { return "opaque" }

func TestCannotTellGoesToReviewAndOperatorResolves(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	var calls atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[opaqueArgs](func(ctx context.Context, j *jobs.Job[opaqueArgs]) error {
		if calls.Add(1) == 1 {
			return jobs.Unknown(errors.New("gateway timed out after sending"))
		}
		return nil
	}))
	e.start(p)
	res := e.enqueue(opaqueArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Review)
	if !strings.Contains(rec.Reason, "no Reconcile") {
		t.Fatalf("review reason %q", rec.Reason)
	}
	ctx := context.Background()
	if _, err := e.client.Resolve(ctx, "default", res.JobID, jobs.DecideRerun, "", "x"); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("anonymous resolve: %v", err)
	}
	if _, err := e.client.Resolve(ctx, "default", res.JobID, jobs.DecideRerun, "alice", "checked the gateway: not charged"); err != nil {
		t.Fatal(err)
	}
	rec = jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("attempts %d", rec.Attempts)
	}
	h, _ := e.ledger.History(ctx, "default", res.JobID)
	found := false
	for _, en := range h {
		if en.Event == "resolve" && en.Actor == "operator:alice" && en.Note == "checked the gateway: not charged" {
			found = true
		}
	}
	if !found {
		t.Fatalf("operator decision not in history: %+v", h)
	}
	if _, err := e.client.Resolve(ctx, "default", res.JobID, jobs.DecideDead, "bob", "late"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("resolving a succeeded job: %v", err)
	}
}

func TestOneLeaderAndStaleLeaderRejected(t *testing.T) {
	e := newEnv(t)
	p1 := e.pool(e.config())
	cfg := e.config()
	p2 := e.pool(cfg)
	for _, p := range []*worker.Pool{p1, p2} {
		_ = worker.Register(p, jobs.WorkFunc[opaqueArgs](func(ctx context.Context, j *jobs.Job[opaqueArgs]) error {
			return jobs.Unknown(errors.New("no idea"))
		}))
	}
	e.start(p1)
	e.start(p2)
	ctx := context.Background()
	redistest.Await(t, e.rdb, e.ns, "a maintenance leader's status", func() bool {
		st, _ := e.ledger.LeaderStatus(ctx)
		return st != nil && st.Leader != ""
	})
	if v := testutil.ToFloat64(e.metric("fencedq_maintenance_leader")); v != 1 {
		t.Fatalf("leader gauge (shared registry, two pools) = %v, want exactly one leader", v)
	}
	// The leader fences every queue it scans, even before deciding
	// anything there: a leader holding an older token is refused. (The
	// queue's high-water, read directly: asking Lead would write it. Its
	// key keeps the name from when the leader was called the reconciler.)
	highWater := e.ns + ":{default}:reconciler"
	redistest.Await(t, e.rdb, highWater, "the leader's token on the default queue", func() bool {
		tok, err := e.rdb.Get(ctx, highWater).Uint64()
		return err == nil && tok > 1
	})
	if err := e.ledger.Lead(ctx, "default", 1); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("old leader token accepted: %v", err)
	}
	res := e.enqueue(opaqueArgs{})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Review)
	_, err := e.ledger.Expire(ctx, "default", 1, 10)
	if !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("stale leader token: %v", err)
	}
}
