package worker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type echoArgs struct {
	N      int    `json:"n"`
	Secret string `json:"secret" fencedq:"sensitive"`
}

func (echoArgs) Kind() string { return "echo" }

func (a echoArgs) Validate() error {
	if a.N < 0 {
		return errors.New("n must not be negative")
	}
	return nil
}

func TestSucceedsWithFenceInContext(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	var got atomic.Value
	if err := worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		f, ok := fence.FromContext(ctx)
		if !ok {
			return errors.New("no fence in context")
		}
		got.Store(f)
		if j.Args.N != 7 || j.Token == 0 || f.Token != j.Token || f.OperationID != j.OperationID {
			return fmt.Errorf("bad job %+v fence %+v", j, f)
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(echoArgs{N: 7, Secret: "hunter2"}, jobs.OperationID("op-1"))
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	waitReported(hooks, 1)
	if rec.Attempts != 1 || rec.OperationID != "op-1" {
		t.Fatalf("record %+v", rec)
	}
	if strings.Contains(string(rec.Args), "hunter2") || !strings.Contains(string(rec.Args), jobs.Redacted) {
		t.Fatalf("args not redacted: %s", rec.Args)
	}
	if f := got.Load().(fence.Fence); f.Resource != "job:"+res.JobID {
		t.Fatalf("fence resource %q", f.Resource)
	}
	h, _ := e.ledger.History(context.Background(), "default", res.JobID)
	if len(h) != 3 || h[0].Event != "enqueued" || h[1].Event != "attempt" || h[2].Outcome != "succeeded" {
		t.Fatalf("history %+v", h)
	}
	if strings.Contains(e.logs.String(), "hunter2") {
		t.Fatal("secret leaked into logs")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_completed_total")); v != 1 {
		t.Fatalf("completed = %v", v)
	}
}

// metric sums every series of a family registered by the pool.
func (e *env) metric(name string) *sumCollector { return &sumCollector{e: e, name: name} }

func TestInvalidArgsWriteNothing(t *testing.T) {
	// A private server: counting every key must see only this test's writes.
	e := newEnvOn(t, redistest.Start(t, redistest.Options{}).Client(), redistest.Namespace(t))
	ctx := context.Background()
	before, _ := redistest.CountKeys(ctx, e.rdb)
	cases := []error{}
	_, err := e.client.Enqueue(ctx, echoArgs{N: -1})
	cases = append(cases, err)
	_, err = e.client.Enqueue(ctx, echoArgs{N: 1}, jobs.Queue("bad queue{}"))
	cases = append(cases, err)
	_, err = e.client.Enqueue(ctx, echoArgs{N: 1}, jobs.MaxRetries(-1))
	cases = append(cases, err)
	_, err = e.client.Enqueue(ctx, nil)
	cases = append(cases, err)
	_, err = e.client.EnqueueRaw(ctx, "echo", []byte("not json"))
	cases = append(cases, err)
	_, err = e.client.EnqueueRaw(ctx, "", []byte("{}"))
	cases = append(cases, err)
	for i, err := range cases {
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("case %d: want ErrInvalid, got %v", i, err)
		}
	}
	after, _ := redistest.CountKeys(ctx, e.rdb)
	if after != before {
		t.Fatalf("invalid enqueues wrote %d keys", after-before)
	}
}

func TestSameOperationConcurrentlyRunsOnce(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	var runs atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		runs.Add(1)
		return nil
	}))
	e.start(p)
	var wg sync.WaitGroup
	ids := make(chan string, 50)
	var dups atomic.Int32
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.client.Enqueue(context.Background(), echoArgs{N: 1}, jobs.OperationID("same-op"))
			if err != nil {
				t.Error(err)
				return
			}
			if res.Deduplicated {
				dups.Add(1)
			}
			ids <- res.JobID
		}()
	}
	wg.Wait()
	close(ids)
	var first string
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first {
			t.Fatalf("two job ids for one operation: %s %s", first, id)
		}
	}
	if dups.Load() != 49 {
		t.Fatalf("deduplicated %d of 50, want 49", dups.Load())
	}
	jobstest.WaitState(t, e.ledger, "default", first, jobs.Succeeded)
	// The one job has succeeded (its handler returned) and nothing else is
	// queued or running: no later run can come.
	counts, err := e.ledger.Counts(context.Background(), "default")
	if err != nil || counts[jobs.Pending] != 0 || counts[jobs.Running] != 0 {
		t.Fatalf("after the one job: counts %v (%v)", counts, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
	st, _ := e.ledger.Stats(context.Background(), "default")
	if st["enqueued"] != 1 || st["deduplicated_enqueue"] != 49 {
		t.Fatalf("stats %v", st)
	}
}

func TestRedeliveryOfSucceededJobIsDeduplicated(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	hooks := worker.InitHooks(p, t)
	var runs atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		runs.Add(1)
		return nil
	}))
	e.start(p)
	res := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	// Force a second delivery of the same job: a stray entry in the due index.
	if err := e.rdb.ZAdd(context.Background(), e.ledger.StateKey("default", jobs.Pending), redis.Z{Score: 1, Member: res.JobID}).Err(); err != nil {
		t.Fatal(err)
	}
	_, _ = e.client.Pause(context.Background(), "default", "test", "")
	_, _ = e.client.Resume(context.Background(), "default", "test", "") // wakes the idle pool
	// The pool counts the duplicate once the claim's reply is back.
	hooks.Claimed.WaitFor("the stray entry dropped as a duplicate", func(ev worker.ClaimEvent) bool {
		for _, d := range ev.Result.Dropped {
			if d.ID == res.JobID && d.State == string(jobs.Succeeded) {
				return true
			}
		}
		return false
	})
	if st, _ := e.ledger.Stats(context.Background(), "default"); st["deduplicated_execute"] != 1 {
		t.Fatalf("stats %v", st)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_deduplicated_total")); v != 1 {
		t.Fatalf("deduplicated metric = %v", v)
	}
	h, _ := e.ledger.History(context.Background(), "default", res.JobID)
	if last := h[len(h)-1]; last.Event != "deduplicated" || last.Stage != "execute" {
		t.Fatalf("history does not record the duplicate: %+v", last)
	}
}

type panicArgs struct{}

func (panicArgs) Kind() string { return "panics" }

type strictArgs struct {
	N int `json:"n"`
}

func (strictArgs) Kind() string { return "strict" }

func TestPanicsUnknownKindsAndMalformedPayloads(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.UnknownKindDefers = 1 // one put-back (1 s), then dead
	p := e.pool(cfg)
	var calls atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[panicArgs](func(ctx context.Context, j *jobs.Job[panicArgs]) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	}))
	_ = worker.Register(p, jobs.WorkFunc[strictArgs](func(ctx context.Context, j *jobs.Job[strictArgs]) error { return nil }))
	if err := worker.Register(p, jobs.WorkFunc[strictArgs](func(ctx context.Context, j *jobs.Job[strictArgs]) error { return nil })); !errors.Is(err, worker.ErrRegistered) {
		t.Fatalf("double registration: %v", err)
	}
	e.start(p)
	ctx := context.Background()
	pan := e.enqueue(panicArgs{}, jobs.MaxRetries(3))
	unknown, err := e.client.EnqueueRaw(ctx, "nobody-handles-this", []byte(`{}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	malformed, err := e.client.EnqueueRaw(ctx, "strict", []byte(`{"n":"not a number"}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.WaitState(t, e.ledger, "default", pan.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("panicking job: %d attempts, want 2", rec.Attempts)
	}
	u := jobstest.WaitState(t, e.ledger, "default", unknown.JobID, jobs.Dead)
	if u.Reason != "unknown kind" || u.KindDefers != 1 || u.Attempts != 1 ||
		!strings.Contains(u.Error, `"nobody-handles-this"`) || !strings.Contains(u.Error, "worker.Register") {
		t.Fatalf("unknown kind: reason %q, error %q, put back %d times, %d attempts; want the error to say what to register",
			u.Reason, u.Error, u.KindDefers, u.Attempts)
	}
	e.rdb.HSet(ctx, e.ledger.JobKey("default", malformed.JobID+"-x"), "kind", "strict", "payload", "null", "state", "pending", "token", "0", "attempts", "0", "max_retries", "3", "created", "1")
	e.rdb.ZAdd(ctx, e.ledger.StateKey("default", jobs.Pending), redis.Z{Score: 1, Member: malformed.JobID + "-x"})
	nm := jobstest.WaitState(t, e.ledger, "default", malformed.JobID+"-x", jobs.Dead)
	if nm.Reason != "malformed payload" {
		t.Fatalf("null args stored by hand: reason %q", nm.Reason)
	}
	m := jobstest.WaitState(t, e.ledger, "default", malformed.JobID, jobs.Dead)
	if m.Reason != "malformed payload" || !strings.Contains(m.Error, "strict") {
		t.Fatalf("malformed: reason %q error %q", m.Reason, m.Error)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "handler panicked") || !strings.Contains(logs, pan.JobID) || !strings.Contains(logs, "goroutine") {
		t.Fatal("panic not logged with job id and stack")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 1 {
		t.Fatalf("panics metric %v", v)
	}
	// unknown kind twice (a put-back, then dead), malformed twice
	if v := testutil.ToFloat64(e.metric("fencedq_jobs_rejected_total")); v != 4 {
		t.Fatalf("rejected metric %v", v)
	}
	if !strings.Contains(e.logs.String(), "put back for another pool") {
		t.Fatal("the put-back was not logged")
	}
}

func TestRetriesThenDead(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	var calls atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		calls.Add(1)
		if j.Args.N == 1 {
			return jobs.Permanent(errors.New("card declined"))
		}
		return errors.New("flaky")
	}))
	e.start(p)
	perm := e.enqueue(echoArgs{N: 1})
	flaky := e.enqueue(echoArgs{N: 2}, jobs.MaxRetries(2))
	r := jobstest.WaitState(t, e.ledger, "default", perm.JobID, jobs.Dead)
	if r.Attempts != 1 || r.Reason != "permanent error" || r.Error != "card declined" {
		t.Fatalf("permanent: %+v", r)
	}
	r = jobstest.WaitState(t, e.ledger, "default", flaky.JobID, jobs.Dead)
	if r.Attempts != 3 || r.Reason != "retries exhausted" {
		t.Fatalf("flaky: attempts %d reason %q", r.Attempts, r.Reason)
	}
}

type slowArgs struct {
	Sleep time.Duration `json:"sleep"`
}

func (slowArgs) Kind() string { return "slow" }

func TestHandlerTimeoutEndsUncertain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[slowArgs](func(ctx context.Context, j *jobs.Job[slowArgs]) error {
		select {
		case <-time.After(j.Args.Sleep):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	e.start(p)
	res := e.enqueue(slowArgs{Sleep: time.Minute}, jobs.Timeout(200*time.Millisecond))
	r := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Uncertain)
	if r.Reason != "deadline passed mid-call" {
		t.Fatalf("reason %q", r.Reason)
	}
}

func TestGracefulShutdownFinishesInFlightJobs(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	started := make(chan struct{}, 4)
	_ = worker.Register(p, jobs.WorkFunc[slowArgs](func(ctx context.Context, j *jobs.Job[slowArgs]) error {
		started <- struct{}{}
		time.Sleep(j.Args.Sleep) // in-flight work that shutdown must let finish
		return nil
	}))
	stop := e.start(p)
	var ids []string
	for range 3 {
		ids = append(ids, e.enqueue(slowArgs{Sleep: 500 * time.Millisecond}).JobID)
	}
	for range 3 {
		<-started
	}
	stop()
	for _, id := range ids {
		r, err := e.ledger.Get(context.Background(), "default", id)
		if err != nil || r.State != jobs.Succeeded {
			t.Fatalf("job %s after shutdown: %+v %v", id, r, err)
		}
	}
}

// TestHandlerGoexitEndsOnlyItsAttempt: a handler that ends its goroutine
// with runtime.Goexit (t.FailNow or t.Fatal in a handler under test)
// instead of returning ends its attempt as a panic does (logged with the
// job id, counted, retried), and the pool keeps its executors: with one
// slot, the job claimed next runs at once instead of waiting, claimed and
// never started, until its lease expires and it goes to review.
func TestHandlerGoexitEndsOnlyItsAttempt(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 1
	p := e.pool(cfg)
	var calls atomic.Int32
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		if j.Args.N == 1 && calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return nil
	}))
	first := e.enqueue(plainArgs{N: 1})
	e.start(p)
	next := e.enqueue(plainArgs{N: 2})
	rec := jobstest.WaitState(t, e.ledger, "default", next.JobID, jobs.Succeeded)
	if rec.Attempts != 1 {
		t.Fatalf("the next job took %d attempts, want 1", rec.Attempts)
	}
	rec = jobstest.WaitState(t, e.ledger, "default", first.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("the job whose handler called Goexit took %d attempts, want 2 (a retry)", rec.Attempts)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "handler ended its goroutine") || !strings.Contains(logs, first.JobID) {
		t.Fatal("the Goexit was not logged with the job id")
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 1 {
		t.Fatalf("panics metric %v, want 1", v)
	}
}

// TestHandlerGoexitAfterItsDeadlineIsUncertain: a handler that ends its
// goroutine with runtime.Goexit once its deadline passed leaves its job
// uncertain, as a panic or an error there does (a timeout does not prove
// failure), instead of retrying an effect that may have happened; it is
// counted as a panic.
func TestHandlerGoexitAfterItsDeadlineIsUncertain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		<-ctx.Done() // the effect's call outlived the deadline
		runtime.Goexit()
		return nil
	}))
	e.start(p)
	res := e.enqueue(plainArgs{N: 1}, jobs.Timeout(200*time.Millisecond), jobs.MaxRetries(3))
	rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Uncertain)
	if rec.Attempts != 1 || rec.Reason != "deadline passed mid-call" || !strings.Contains(rec.Error, "Goexit") {
		t.Fatalf("attempts %d, reason %q, error %q: want the first attempt uncertain, its deadline passed", rec.Attempts, rec.Reason, rec.Error)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 1 {
		t.Fatalf("panics metric %v, want 1", v)
	}
}
