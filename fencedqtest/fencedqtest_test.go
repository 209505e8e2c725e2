package fencedqtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type email struct {
	To   string `json:"to"`
	Body string `json:"body" fencedq:"sensitive"`
}

func (email) Kind() string { return "email" }

type debit struct {
	Account string `json:"account"`
	Cents   int    `json:"cents"`
}

func (debit) Kind() string       { return "debit" }
func (d debit) Resource() string { return "account:" + d.Account }
func (d debit) Validate() error {
	if d.Cents <= 0 {
		return errors.New("cents must be positive")
	}
	return nil
}

// fatalTB records a helper's failure instead of failing the test: Fatal
// ends the helper's goroutine, as it would end a test's.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// failure runs fn with a fatalTB and returns the failure it reported ("":
// none).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

func newEnv(t *testing.T) (*fencedqtest.Env, *jobs.Client) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	return fencedqtest.New(rdb, cfg), jobs.NewClient(rdb, cfg)
}

// TestRequireEnqueued: jobs are matched by kind, args (sensitive fields
// included) and options; none or several matching fail the test, naming
// what was found with args redacted.
func TestRequireEnqueued(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, email{To: "ada@example.com", Body: "your receipt"}, jobs.Queue("mail"),
		jobs.OperationID("receipt:1"), jobs.MaxRetries(2), jobs.Timeout(time.Second), jobs.Header("tenant", "acme")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, email{To: "bob@example.com", Body: "later"}, jobs.Queue("mail"), jobs.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, debit{Account: "7", Cents: 5}); err != nil {
		t.Fatal(err)
	}

	job := fencedqtest.RequireEnqueued[email](ctx, t, env, &fencedqtest.Want{
		Args: email{To: "ada@example.com", Body: "your receipt"}, Queue: "mail", OperationID: "receipt:1",
		State: jobs.Pending, MaxRetries: 2, Timeout: time.Second, Headers: map[string]string{"tenant": "acme"},
	})
	if job.Args.To != "ada@example.com" || job.Args.Body != "your receipt" || job.Record.Queue != "mail" {
		t.Fatalf("found %+v", job)
	}
	if later := fencedqtest.RequireEnqueued[email](ctx, t, env, &fencedqtest.Want{Scheduled: true, DueAfter: time.Now().Add(50 * time.Minute)}); later.Args.To != "bob@example.com" {
		t.Fatalf("scheduled job found: %+v", later.Args)
	}
	fencedqtest.RequireEnqueued[debit](ctx, t, env, &fencedqtest.Want{Resource: "account:7"})
	if n := len(fencedqtest.Enqueued[email](ctx, t, env, nil)); n != 2 {
		t.Fatalf("%d email jobs, want 2", n)
	}
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Args: email{To: "ada@example.com", Body: "another body"}})
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Queue: "default"})

	for name, c := range map[string]struct {
		fn   func(tb testing.TB)
		want string
	}{
		"several": {func(tb testing.TB) { fencedqtest.RequireEnqueued[email](ctx, tb, env, nil) }, "found 2 jobs"},
		"none": {func(tb testing.TB) {
			fencedqtest.RequireEnqueued[email](ctx, tb, env, &fencedqtest.Want{Headers: map[string]string{"tenant": "other"}})
		}, "found no job"},
		"present": {func(tb testing.TB) {
			fencedqtest.RequireNotEnqueued[debit](ctx, tb, env, nil)
		}, "want no debit job matching anything, found 1"},
	} {
		msg := failure(t, c.fn)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: failure %q, want it to say %q", name, msg, c.want)
		}
		if strings.Contains(msg, "your receipt") || strings.Contains(msg, "later") {
			t.Errorf("%s: failure message shows a sensitive field: %s", name, msg)
		}
	}
}

// TestWorkRunsARealAttempt: an inline attempt claims the job with a new
// token, leases the resource its args name (its token is the fence), runs
// the handler with the fence, lease and deadline in its context, and
// commits the outcome by its token; a retry is due at once for the next.
func TestWorkRunsARealAttempt(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	var seen []fence.Fence
	calls := 0
	w := jobs.WorkFunc[debit](func(ctx context.Context, j *jobs.Job[debit]) error {
		f, ok := fence.FromContext(ctx)
		l, hasLease := lease.FromContext(ctx)
		d, hasDeadline := ctx.Deadline()
		if !ok || !hasLease || !hasDeadline || f.Token != j.Token || l.Token != j.Token || !d.Equal(j.Deadline) ||
			f.Resource != "account:"+j.Args.Account || f.OperationID != j.OperationID {
			return jobs.Permanent(fmt.Errorf("attempt context: fence %+v %v, lease %+v %v, deadline %v %v", f, ok, l, hasLease, d, hasDeadline))
		}
		seen = append(seen, f)
		if calls++; calls == 1 {
			return errors.New("bank busy")
		}
		return nil
	})
	res := fencedqtest.Work(ctx, t, env, w, debit{Account: "7", Cents: 5}, jobs.Timeout(3*time.Second))
	if res.Outcome != worker.OutcomeRetry || res.Err == nil || res.Record.State != jobs.Pending || res.Record.Attempts != 1 {
		t.Fatalf("first attempt %+v (record %+v): want a retry", res, res.Record)
	}
	again := fencedqtest.WorkJob(ctx, t, env, w, res.Record.Queue, res.Record.ID)
	if again.Outcome != worker.OutcomeSucceeded || again.Err != nil || again.Record.State != jobs.Succeeded || again.Record.Attempts != 2 {
		t.Fatalf("second attempt %+v (record %+v): want success", again, again.Record)
	}
	if len(seen) != 2 || seen[1].Token <= seen[0].Token || again.Token != seen[1].Token || again.Record.Fence != seen[1].Token {
		t.Fatalf("fences %+v, result token %d, record fence %d: want rising resource-lease tokens, recorded", seen, again.Token, again.Record.Fence)
	}
	h, err := client.Inspector().History(ctx, res.Record.Queue, res.Record.ID)
	if err != nil || len(h) != 5 {
		t.Fatalf("history %+v %v: want enqueued, two attempts and their ends", h, err)
	}

	// Outcomes by the pool's rules.
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"permanent": {jobs.Permanent(errors.New("closed account")), worker.OutcomeDead},
		"unknown":   {jobs.Unknown(errors.New("no answer")), worker.OutcomeUncertain},
	} {
		r := fencedqtest.Work(ctx, t, env, jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error { return c.err }), email{To: name})
		if r.Outcome != c.want || r.Record.State != jobs.State(c.want) || !errors.Is(r.Err, c.err) {
			t.Errorf("%s: %+v, want %s", name, r, c.want)
		}
	}
	panicked := fencedqtest.Work(ctx, t, env, jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error { panic("boom") }), email{To: "p"}, jobs.MaxRetries(0))
	if panicked.Outcome != worker.OutcomeDead || panicked.Record.Reason != "retries exhausted" || !strings.Contains(panicked.Err.Error(), "boom") {
		t.Errorf("panic with no retries: %+v (record %+v)", panicked, panicked.Record)
	}
	raw, err := client.EnqueueRaw(ctx, "debit", []byte(`{"account":"7","cents":0}`), jobs.Unchecked())
	if err != nil {
		t.Fatal(err)
	}
	if r := fencedqtest.WorkJob(ctx, t, env, w, raw.Queue, raw.JobID); r.Outcome != worker.OutcomeDead || r.Record.Reason != "malformed payload" {
		t.Errorf("args that do not validate: %+v (record %+v), want dead as malformed", r, r.Record)
	}
	if msg := failure(t, func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, again.Record.Queue, again.Record.ID) }); !strings.Contains(msg, "not pending") {
		t.Errorf("working a succeeded job: failure %q, want it to say the job is not pending", msg)
	}
	if msg := failure(t, func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, raw.Queue, panicked.Record.ID) }); !strings.Contains(msg, "not debit") {
		t.Errorf("working a job of another kind: failure %q", msg)
	}
}

// TestWaitState: WaitState returns once a pool moved the job to the state,
// and fails the test, saying where the job is, when its context ends first.
func TestWaitState(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	env, client := fencedqtest.New(rdb, cfg), jobs.NewClient(rdb, cfg)
	ctx := context.Background()
	parked, err := client.Enqueue(ctx, email{To: "later"}, jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if msg := failure(t, func(tb testing.TB) { env.WaitState(short, tb, parked.JobID, jobs.Succeeded) }); !strings.Contains(msg, "it is pending") {
		t.Fatalf("failure %q, want it to say the job is pending", msg)
	}

	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(pool, jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	res, err := client.Enqueue(ctx, email{To: "now"})
	if err != nil {
		t.Fatal(err)
	}
	if rec := env.WaitState(ctx, t, res.JobID, jobs.Succeeded, jobs.Dead); rec.State != jobs.Succeeded || rec.Attempts != 1 {
		t.Fatalf("record %+v", rec)
	}
}

type emailWorker struct{ sent chan string }

func (w emailWorker) Work(_ context.Context, j *jobs.Job[email]) error {
	w.sent <- j.Args.To
	return nil
}

// TestHelpersOnAPartitionedQueue: on a partitioned queue the helpers take
// the queue's name as every read does (README, "Partitioned queues"):
// Enqueued and RequireEnqueued with Want.Queue find the job in whichever
// partition it went to, WorkJob given the queue's name works it, and Work
// (which enqueues, then works by the result's queue name) runs it.
func TestHelpersOnAPartitionedQueue(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	cfg := jobs.Config{Namespace: ns}
	client := jobs.NewClient(rdb, cfg)
	if _, err := client.SetPartitions(ctx, "mail", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	env := fencedqtest.New(rdb, cfg)
	res, err := client.Enqueue(ctx, email{To: "ada@example.com"}, jobs.Queue("mail"), jobs.OperationID("welcome:ada"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Partition == "mail" {
		t.Fatalf("the job went to %s, want a partition of mail", res.Partition)
	}
	job := fencedqtest.RequireEnqueued[email](ctx, t, env, &fencedqtest.Want{Queue: "mail", OperationID: "welcome:ada"})
	if job.Record.ID != res.JobID || job.Record.Queue != res.Partition {
		t.Fatalf("found job %s in %s, want %s in %s", job.Record.ID, job.Record.Queue, res.JobID, res.Partition)
	}
	if got := fencedqtest.Enqueued[email](ctx, t, env, &fencedqtest.Want{Queue: res.Partition}); len(got) != 1 {
		t.Fatalf("by the partition's name: %d jobs, want 1", len(got))
	}
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Queue: "other"})
	w := emailWorker{sent: make(chan string, 2)}
	r := fencedqtest.WorkJob(ctx, t, env, w, "mail", res.JobID)
	if r.Outcome != worker.OutcomeSucceeded || r.Record.Queue != res.Partition || <-w.sent != "ada@example.com" {
		t.Fatalf("WorkJob by the queue's name: %s in %s", r.Outcome, r.Record.Queue)
	}
	r = fencedqtest.Work(ctx, t, env, w, email{To: "bob@example.com"}, jobs.Queue("mail"))
	if r.Outcome != worker.OutcomeSucceeded || <-w.sent != "bob@example.com" {
		t.Fatalf("Work on a partitioned queue: %s, %v", r.Outcome, r.Err)
	}
}

type order struct {
	ID   int64  `json:"id"`
	Card string `json:"card" fencedq:"sensitive"`
}

func (order) Kind() string { return "order" }

// TestRequireEnqueuedComparesNumbersExactly: args are compared as JSON
// with every digit of their numbers, so an int64 id beyond 2^53 matches
// only itself.
func TestRequireEnqueuedComparesNumbersExactly(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, order{ID: 9007199254740993}); err != nil {
		t.Fatal(err)
	}
	fencedqtest.RequireNotEnqueued[order](ctx, t, env, &fencedqtest.Want{Args: order{ID: 9007199254740992}})
	fencedqtest.RequireEnqueued[order](ctx, t, env, &fencedqtest.Want{Args: order{ID: 9007199254740993}})
}

// cardV1 and cardV2 are two versions of one kind's args: a job enqueued
// by the first does not decode into the second.
type cardV1 struct {
	Expiry string `json:"expiry" fencedq:"sensitive"`
}

func (cardV1) Kind() string { return "card" }

type cardV2 struct {
	Expiry time.Time `json:"expiry" fencedq:"sensitive"`
}

func (cardV2) Kind() string { return "card" }

// TestEnqueuedArgsThatDoNotDecodeAreNotQuoted: a job whose args do not
// decode into the kind's type fails the helper without quoting a
// sensitive value (jobs.DecodeArgs).
func TestEnqueuedArgsThatDoNotDecodeAreNotQuoted(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, cardV1{Expiry: "2031-99"}); err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) { fencedqtest.Enqueued[cardV2](ctx, tb, env, nil) })
	if !strings.Contains(msg, "do not decode") || strings.Contains(msg, "2031-99") {
		t.Fatalf("failure %q: want one that says the args do not decode without quoting them", msg)
	}
}

// TestWorkJobWhoseContextEnds: a ctx that ends while the handler runs
// cuts the attempt off as a pool's shutdown does: the job is left
// uncertain (its effect may have happened), not retried, and the helper
// still reports the committed record.
func TestWorkJobWhoseContextEnds(t *testing.T) {
	env, _ := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := fencedqtest.Work(ctx, t, env, jobs.WorkFunc[email](func(ctx context.Context, j *jobs.Job[email]) error {
		cancel() // the test gives up while the handler waits on its dependency
		<-ctx.Done()
		return ctx.Err()
	}), email{To: "ada@example.com"})
	if r.Outcome != worker.OutcomeUncertain || r.Record == nil || r.Record.State != jobs.Uncertain || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("%+v: want the job uncertain", r)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	r = fencedqtest.Work(ctx2, t, env, jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error {
		cancel2()
		return nil // done before it noticed
	}), email{To: "bob@example.com"})
	if r.Outcome != worker.OutcomeSucceeded || r.Record.State != jobs.Succeeded {
		t.Fatalf("%+v: a handler that succeeded despite the cancellation: want succeeded", r)
	}
}

// TestHelpersTakePointerArgs: the helpers take a pointer to args as their
// type argument (its Kind a method of the value), as worker.Register does.
func TestHelpersTakePointerArgs(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, &email{To: "ada@example.com"}, jobs.OperationID("ptr-1")); err != nil {
		t.Fatal(err)
	}
	job := fencedqtest.RequireEnqueued[*email](ctx, t, env, &fencedqtest.Want{OperationID: "ptr-1"})
	if job.Args == nil || job.Args.To != "ada@example.com" {
		t.Fatalf("found %+v", job.Args)
	}
	var sent string
	res := fencedqtest.WorkJob(ctx, t, env, jobs.WorkFunc[*email](func(_ context.Context, j *jobs.Job[*email]) error {
		sent = j.Args.To
		return nil
	}), job.Record.Queue, job.Record.ID)
	if res.Outcome != worker.OutcomeSucceeded || sent != "ada@example.com" {
		t.Fatalf("outcome %s (%v), sent to %q", res.Outcome, res.Err, sent)
	}
}

// TestEnvOverANilClientOrAnInvalidConfig: an Env built over a nil Redis
// client or an invalid jobs.Config fails each helper's test with the
// mistake (matching jobs.ErrInvalid's text) instead of panicking or
// reading another namespace.
func TestEnvOverANilClientOrAnInvalidConfig(t *testing.T) {
	rdb, _ := redistest.New(t)
	var typedNil *redis.Client
	ctx := context.Background()
	for name, env := range map[string]*fencedqtest.Env{
		"nil client":       fencedqtest.New(nil, jobs.Config{}),
		"typed nil client": fencedqtest.New(typedNil, jobs.Config{}),
		"bad namespace":    fencedqtest.New(rdb, jobs.Config{Namespace: "bad ns"}),
	} {
		for helper, fn := range map[string]func(tb testing.TB){
			"Enqueued":           func(tb testing.TB) { fencedqtest.Enqueued[email](ctx, tb, env, nil) },
			"RequireNotEnqueued": func(tb testing.TB) { fencedqtest.RequireNotEnqueued[email](ctx, tb, env, nil) },
			"WaitState":          func(tb testing.TB) { env.WaitState(ctx, tb, "some-job", jobs.Succeeded) },
		} {
			if msg := failure(t, fn); !strings.Contains(msg, "invalid argument") {
				t.Errorf("%s, %s: failure %q, want the mistake", name, helper, msg)
			}
		}
	}
}

// TestNilOrZeroEnvFailsTheTest: an Env New did not make (a nil pointer,
// such as an unset field of a suite, or a zero value) fails each helper's
// test saying to use New, instead of panicking; New's Env over the same
// Redis works.
func TestNilOrZeroEnvFailsTheTest(t *testing.T) {
	ctx := context.Background()
	var unset *fencedqtest.Env
	w := emailWorker{sent: make(chan string, 1)}
	for name, env := range map[string]*fencedqtest.Env{"nil": unset, "zero": {}} {
		for helper, fn := range map[string]func(tb testing.TB){
			"Enqueued":           func(tb testing.TB) { fencedqtest.Enqueued[email](ctx, tb, env, nil) },
			"RequireNotEnqueued": func(tb testing.TB) { fencedqtest.RequireNotEnqueued[email](ctx, tb, env, nil) },
			"WaitState":          func(tb testing.TB) { env.WaitState(ctx, tb, "some-job", jobs.Succeeded) },
			"Work":               func(tb testing.TB) { fencedqtest.Work(ctx, tb, env, w, email{To: "ada@example.com"}) },
			"WorkJob":            func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, "default", "some-job") },
		} {
			msg := failure(t, func(tb testing.TB) {
				defer func() {
					if r := recover(); r != nil {
						tb.Fatalf("panicked: %v", r)
					}
				}()
				fn(tb)
			})
			if !strings.Contains(msg, "fencedqtest.New") {
				t.Errorf("%s Env, %s: failure %q, want one saying to use fencedqtest.New", name, helper, msg)
			}
		}
	}
	env, _ := newEnv(t)
	if res := fencedqtest.Work(ctx, t, env, w, email{To: "ada@example.com"}); res.Outcome != worker.OutcomeSucceeded {
		t.Fatalf("New's Env: Work: %s, %v", res.Outcome, res.Err)
	}
}

type (
	callback     struct{ Run func() }
	callbackArgs struct{ Then *callback } // encodes while Then is nil
)

func (callbackArgs) Kind() string { return "callback" }

// TestWorkRefusesArgsThatCannotBeAJSONObject: Work and WorkJob fail the
// test for an args type that cannot encode as a JSON object, as
// worker.Register refuses it, even when the value given encodes; Work
// enqueues nothing.
func TestWorkRefusesArgsThatCannotBeAJSONObject(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	w := jobs.WorkFunc[callbackArgs](func(context.Context, *jobs.Job[callbackArgs]) error { return nil })
	msg := failure(t, func(tb testing.TB) { fencedqtest.Work(ctx, tb, env, w, callbackArgs{}) })
	if !strings.Contains(msg, "callback") || !strings.Contains(msg, "Then.Run") {
		t.Errorf("Work: failure %q, want the args type refused naming its field", msg)
	}
	if n, err := client.Inspector().Counts(ctx, "default"); err != nil || n[jobs.Pending] != 0 {
		t.Errorf("pending after a refused Work: %v %v", n, err)
	}
	res, err := client.Enqueue(ctx, callbackArgs{})
	if err != nil {
		t.Fatal(err)
	}
	msg = failure(t, func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, w, res.Queue, res.JobID) })
	if !strings.Contains(msg, "Then.Run") {
		t.Errorf("WorkJob: failure %q, want the args type refused", msg)
	}
}

// TestWorkJobWhoseHandlerFailsTheTest: a handler under test that calls
// t.Fatal (runtime.Goexit) ends the test's goroutine inside WorkJob; the
// attempt is still committed, as a pool commits it, a retry, instead of
// the job being left running (its resource leased) for the tests after.
func TestWorkJobWhoseHandlerFailsTheTest(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	res, err := client.Enqueue(ctx, debit{Account: "a1", Cents: 5})
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) {
		fencedqtest.WorkJob(ctx, tb, env, jobs.WorkFunc[debit](func(context.Context, *jobs.Job[debit]) error {
			tb.Fatal("the fake ledger refused the debit")
			return nil
		}), res.Queue, res.JobID)
	})
	if msg != "the fake ledger refused the debit" {
		t.Fatalf("failure %q", msg)
	}
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil || rec.State != jobs.Pending || rec.Attempts != 1 {
		t.Fatalf("record %+v (%v): want pending again after its one attempt", rec, err)
	}
	// The resource lease was released: the next attempt runs at once.
	r := fencedqtest.WorkJob(ctx, t, env, jobs.WorkFunc[debit](func(context.Context, *jobs.Job[debit]) error { return nil }), res.Queue, res.JobID)
	if r.Outcome != worker.OutcomeSucceeded {
		t.Fatalf("the next attempt: %+v", r)
	}
}

// TestWorkJobNamesTheJobThatAppliedTheEffect: an attempt refused because
// another job (the same operation id in another queue) already applied the
// effect succeeds with a reason naming that job, as a pool's attempt does.
func TestWorkJobNamesTheJobThatAppliedTheEffect(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	first, err := client.Enqueue(ctx, email{To: "ada@example.com"}, jobs.Queue("mail"), jobs.OperationID("receipt:1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Enqueue(ctx, email{To: "ada@example.com"}, jobs.Queue("mail-eu"), jobs.OperationID("receipt:1"))
	if err != nil {
		t.Fatal(err)
	}
	owner := "pool-1/" + first.JobID
	w := jobs.WorkFunc[email](func(ctx context.Context, j *jobs.Job[email]) error {
		f, _ := fence.FromContext(ctx)
		return &fence.AlreadyAppliedError{Record: fence.Effect{OperationID: "receipt:1", Resource: "mailbox", Token: 7, Owner: owner}, Fence: f}
	})
	res := fencedqtest.WorkJob(ctx, t, env, w, second.Queue, second.JobID)
	want := fmt.Sprintf("effect already applied by job %s in queue mail (token 7 on mailbox)", first.JobID)
	if res.Outcome != worker.OutcomeSucceeded || res.Record.Reason != want {
		t.Fatalf("outcome %s, reason %q: want succeeded, reason %q", res.Outcome, res.Record.Reason, want)
	}
}

// TestRequireEnqueuedWithNilPointerArgs: Want.Args set to a nil pointer
// asks for args that are JSON null, which no job has: it matches nothing
// rather than every job of the kind.
func TestRequireEnqueuedWithNilPointerArgs(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, &email{To: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	if got := fencedqtest.Enqueued[*email](ctx, t, env, &fencedqtest.Want{Args: (*email)(nil)}); len(got) != 0 {
		t.Fatalf("a nil pointer as Want.Args matched %d jobs, want none", len(got))
	}
}

// noEffects is an effect log that holds no effect.
type noEffects struct{}

func (noEffects) Applied(context.Context, string) (fence.Effect, bool, error) {
	return fence.Effect{}, false, nil
}

// TestWorkJobWithAnEffectLog: a dependency's timeout before the job's
// deadline leaves the job uncertain when the Env names the pools' effect
// log, as such a pool does, and is retried without one.
func TestWorkJobWithAnEffectLog(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	client := jobs.NewClient(rdb, cfg)
	ctx := context.Background()
	timedOut := jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error {
		return fmt.Errorf("smtp: %w", os.ErrDeadlineExceeded)
	})
	for _, tc := range []struct {
		name string
		env  *fencedqtest.Env
		want string
	}{
		{"without", fencedqtest.New(rdb, cfg), worker.OutcomeRetry},
		{"with", fencedqtest.New(rdb, cfg, fencedqtest.WithEffectLog(noEffects{})), worker.OutcomeUncertain},
	} {
		res, err := client.Enqueue(ctx, email{To: "ada@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		r := fencedqtest.WorkJob(ctx, t, tc.env, timedOut, res.Queue, res.JobID)
		if r.Outcome != tc.want {
			t.Errorf("%s an effect log: outcome %s (reason %q), want %s", tc.name, r.Outcome, r.Record.Reason, tc.want)
		}
	}
}

// TestWorkJobWithAHandlerTimeout: a job that sets no timeout gets the
// pools' HandlerTimeout named by the Env, and a handler still running at
// its end leaves the job uncertain, as in those pools; the job's own
// timeout still wins.
func TestWorkJobWithAHandlerTimeout(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	client := jobs.NewClient(rdb, cfg)
	env := fencedqtest.New(rdb, cfg, fencedqtest.WithHandlerTimeout(100*time.Millisecond))
	ctx := context.Background()
	slow := jobs.WorkFunc[email](func(ctx context.Context, j *jobs.Job[email]) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
			return nil
		}
	})
	for _, tc := range []struct {
		opts []jobs.Option
		want string
	}{
		{nil, worker.OutcomeUncertain},
		{[]jobs.Option{jobs.Timeout(10 * time.Second)}, worker.OutcomeSucceeded},
	} {
		res, err := client.Enqueue(ctx, email{To: "ada@example.com"}, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if r := fencedqtest.WorkJob(ctx, t, env, slow, res.Queue, res.JobID); r.Outcome != tc.want {
			t.Errorf("timeout option %d: outcome %s (reason %q), want %s", len(tc.opts), r.Outcome, r.Record.Reason, tc.want)
		}
	}
}

type lookup struct {
	Key string `json:"key"`
}

func (lookup) Kind() string { return "lookup" }

// lookupError is an error type whose Error method reads its receiver.
type lookupError struct{ key string }

func (e *lookupError) Error() string { return "no such key " + e.key }

// TestWorkJobWithANilPointerError: a handler that returns a nil pointer of
// an error type whose Error method dereferences it has its inline attempt
// committed as a pool commits it, a panic's retry, instead of panicking
// in the test with the job left running.
func TestWorkJobWithANilPointerError(t *testing.T) {
	env, _ := newEnv(t)
	ctx := context.Background()
	r := fencedqtest.Work(ctx, t, env, jobs.WorkFunc[lookup](func(context.Context, *jobs.Job[lookup]) error {
		var missing *lookupError
		return missing
	}), lookup{Key: "k"})
	if r.Outcome != worker.OutcomeRetry || r.Record.State != jobs.Pending || !strings.Contains(r.Err.Error(), "handler panicked") {
		t.Fatalf("%+v (record %+v): want a panic's retry", r, r.Record)
	}
}

// TestWorkOfADuplicate: Work of args whose enqueue is deduplicated fails
// the test naming the existing job and why it exists already: its
// operation id, or the unique key it holds (the duplicate gave no
// operation id, so the failure must not say one was known).
func TestWorkOfADuplicate(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	w := jobs.WorkFunc[email](func(context.Context, *jobs.Job[email]) error { return nil })
	byTo := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"to"}})
	held, err := client.Enqueue(ctx, email{To: "ada@example.com", Body: "first"}, byTo)
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) {
		fencedqtest.Work(ctx, tb, env, w, email{To: "ada@example.com", Body: "second"}, byTo)
	})
	if !strings.Contains(msg, held.JobID) || !strings.Contains(msg, "unique key") {
		t.Errorf("Work of a unique job's duplicate: failure %q, want it to name job %s and its unique key", msg, held.JobID)
	}
	known, err := client.Enqueue(ctx, email{To: "bob@example.com"}, jobs.OperationID("welcome:bob"))
	if err != nil {
		t.Fatal(err)
	}
	msg = failure(t, func(tb testing.TB) {
		fencedqtest.Work(ctx, tb, env, w, email{To: "bob@example.com"}, jobs.OperationID("welcome:bob"))
	})
	if !strings.Contains(msg, known.JobID) || !strings.Contains(msg, "welcome:bob") {
		t.Errorf("Work of a known operation id: failure %q, want it to name job %s and the operation id", msg, known.JobID)
	}
}

// TestWorkJobWhoseHandlerFailsTheTestAfterItsDeadline: a handler that
// calls t.Fatal (runtime.Goexit) once its deadline passed ends the job
// uncertain (its effect may have happened), as a pool commits it, not as
// a retry.
func TestWorkJobWhoseHandlerFailsTheTestAfterItsDeadline(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	res, err := client.Enqueue(ctx, debit{Account: "a2", Cents: 5}, jobs.Timeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) {
		fencedqtest.WorkJob(ctx, tb, env, jobs.WorkFunc[debit](func(ctx context.Context, _ *jobs.Job[debit]) error {
			<-ctx.Done()
			tb.Fatal("the debit timed out")
			return nil
		}), res.Queue, res.JobID)
	})
	if msg != "the debit timed out" {
		t.Fatalf("failure %q", msg)
	}
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil || rec.State != jobs.Uncertain {
		t.Fatalf("record %+v (%v): want uncertain, as a pool leaves it", rec, err)
	}
}

// TestWorkJobWatchesForAnOperatorsCancel: an operator who cancels a job
// while WorkJob runs its handler cancels the handler's context, as a
// pool's renewal does, with a cause saying so; a handler that stops and
// returns its context's error, or its context's cause marked permanent,
// ends the job cancelled (the operator's intent), not retried or dead.
func TestWorkJobWatchesForAnOperatorsCancel(t *testing.T) {
	for name, stop := range map[string]func(ctx context.Context) error{
		"context error":             func(ctx context.Context) error { return ctx.Err() },
		"permanent context cause":   func(ctx context.Context) error { return jobs.Permanent(context.Cause(ctx)) },
		"permanent context error":   func(ctx context.Context) error { return jobs.Permanent(ctx.Err()) },
		"an error of its own":       func(context.Context) error { return errors.New("stopped") },
		"a wrapped permanent cause": func(ctx context.Context) error { return fmt.Errorf("charge: %w", jobs.Permanent(context.Cause(ctx))) },
	} {
		t.Run(name, func(t *testing.T) {
			env, client := newEnv(t)
			ctx := context.Background()
			res, err := client.Enqueue(ctx, email{To: "ada@example.com"}, jobs.Timeout(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			cancelled := make(chan error, 1)
			var cause error
			r := fencedqtest.WorkJob(ctx, t, env, jobs.WorkFunc[email](func(ctx context.Context, j *jobs.Job[email]) error {
				go func() {
					_, err := client.Cancel(context.Background(), j.Queue, j.ID, "alice", "customer withdrew")
					cancelled <- err
				}()
				<-ctx.Done() // the job's deadline is an hour away: only the cancel ends this
				cause = context.Cause(ctx)
				return stop(ctx)
			}), res.Queue, res.JobID)
			if err := <-cancelled; err != nil {
				t.Fatal(err)
			}
			if r.Outcome != worker.OutcomeCancelled || r.Record.State != jobs.Cancelled || r.Record.CancelledBy == "" {
				t.Fatalf("%s (reason %q, error %v): want the job cancelled", r.Outcome, r.Record.Reason, r.Err)
			}
			if cause == nil || errors.Is(cause, context.Canceled) || !strings.Contains(cause.Error(), "cancelled by an operator") {
				t.Fatalf("the handler's context's cause is %v, want one saying an operator cancelled the job", cause)
			}
		})
	}
}

// TestWorkRefusesANilWorker: a nil worker (a nil interface, or a nil
// pointer of a worker type) fails the test naming it, as worker.Register
// refuses it, before anything is enqueued or claimed; the job WorkJob was
// given stays pending with its attempts unspent.
func TestWorkRefusesANilWorker(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	var nilFunc jobs.WorkFunc[debit]
	for name, w := range map[string]jobs.Worker[debit]{"nil interface": nil, "nil func": nilFunc} {
		msg := failure(t, func(tb testing.TB) { fencedqtest.Work(ctx, tb, env, w, debit{Account: "a", Cents: 1}) })
		if !strings.Contains(msg, worker.ErrNilWorker.Error()) || !strings.Contains(msg, "debit") {
			t.Errorf("Work with a %s: failure %q, want the nil worker named", name, msg)
		}
		if n, err := client.Inspector().Counts(ctx, "default"); err != nil || n[jobs.Pending] != 0 {
			t.Errorf("pending after Work with a %s: %v %v", name, n, err)
		}
	}
	res, err := client.Enqueue(ctx, debit{Account: "a", Cents: 1})
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) { fencedqtest.WorkJob(ctx, tb, env, jobs.Worker[debit](nil), res.Queue, res.JobID) })
	if !strings.Contains(msg, worker.ErrNilWorker.Error()) {
		t.Errorf("WorkJob with a nil worker: failure %q, want the nil worker named", msg)
	}
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil || rec.State != jobs.Pending || rec.Attempts != 0 {
		t.Fatalf("the job after WorkJob with a nil worker: %+v %v, want pending with no attempt", rec, err)
	}
}

// TestWaitStateRefusesAnEmptyID: WaitState for an empty job id, which no
// job has, fails the test at once naming the mistake instead of waiting
// out its context.
func TestWaitStateRefusesAnEmptyID(t *testing.T) {
	env, _ := newEnv(t)
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg := failure(t, func(tb testing.TB) { env.WaitState(wctx, tb, "", jobs.Succeeded) })
	if !strings.Contains(msg, "WaitState needs a job id") || wctx.Err() != nil {
		t.Errorf("WaitState for an empty id: failure %q (context %v), want it refused at once", msg, wctx.Err())
	}
}

// TestRequireEnqueuedByFlowControl: jobs are matched by their group,
// limit and rate (keys and maxes), jobs waiting in their group's index or
// parked on their limit included.
func TestRequireEnqueuedByFlowControl(t *testing.T) {
	env, client := newEnv(t)
	ctx := context.Background()
	for i, opts := range [][]jobs.Option{
		{jobs.Group("acme"), jobs.Limit("export:acme", 1)},
		{jobs.Group("acme"), jobs.Limit("export:acme", 1)}, // waiting in its group's index
		{jobs.Group("globex"), jobs.Rate("provider", 100, time.Second)},
		{jobs.Limit("export:solo", 1)},
		{jobs.Limit("export:solo", 1)}, // parked behind the first's promise
	} {
		if _, err := client.Enqueue(ctx, email{To: fmt.Sprintf("u%d@example.com", i)}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fencedqtest.Enqueued[email](ctx, t, env, &fencedqtest.Want{Group: "acme", Limit: "export:acme", LimitMax: 1})); n != 2 {
		t.Fatalf("%d jobs of group acme under limit export:acme max 1, want 2", n)
	}
	if n := len(fencedqtest.Enqueued[email](ctx, t, env, &fencedqtest.Want{Limit: "export:solo", State: jobs.Pending})); n != 2 {
		t.Fatalf("%d pending jobs under limit export:solo, want 2 (one parked)", n)
	}
	job := fencedqtest.RequireEnqueued[email](ctx, t, env, &fencedqtest.Want{Rate: "provider", RateMax: 100})
	if job.Args.To != "u2@example.com" || job.Record.Group != "globex" {
		t.Fatalf("rate-limited job found: %+v, group %q", job.Args, job.Record.Group)
	}
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Limit: "export:acme", LimitMax: 2})
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Rate: "provider", RateMax: 10})
	fencedqtest.RequireNotEnqueued[email](ctx, t, env, &fencedqtest.Want{Group: "initech"})
	msg := failure(t, func(tb testing.TB) {
		fencedqtest.RequireEnqueued[email](ctx, tb, env, &fencedqtest.Want{Group: "initech", Limit: "export:initech"})
	})
	if !strings.Contains(msg, "group initech") || !strings.Contains(msg, "limit export:initech") {
		t.Fatalf("failure %q does not name the group and limit wanted", msg)
	}
}
