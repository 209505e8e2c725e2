package worker_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestMiddlewarePanicAfterNextKeepsTheOutcome: a middleware that panics
// once the handler returned keeps the handler's outcome (a success commits
// once, a permanent failure stays one), and the panic is logged with the
// job's id and counted.
func TestMiddlewarePanicAfterNextKeepsTheOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			_ = next(ctx, job)
			panic("middleware panicked after next")
		}
	}}
	p := e.pool(cfg)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		calls.Add(1)
		if j.Args.FailTimes > 0 {
			return jobs.Permanent(errors.New("refused"))
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	ok := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", ok.JobID, jobs.Succeeded)
	if rec.Attempts != 1 {
		t.Fatalf("succeeded after %d attempts, want 1", rec.Attempts)
	}
	failed := e.enqueue(wrappedArgs{FailTimes: 1}, jobs.MaxRetries(0))
	rec = jobstest.WaitState(t, e.ledger, "default", failed.JobID, jobs.Dead)
	if rec.Reason != "permanent error" || !strings.Contains(rec.Error, "refused") {
		t.Fatalf("failed job: reason %q, error %q: want the handler's permanent error", rec.Reason, rec.Error)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the handler ran %d times for two jobs", n)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 2 {
		t.Fatalf("panics metric %v, want 2", v)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "middleware panicked after next") || !strings.Contains(logs, ok.JobID) {
		t.Fatal("the middleware's panic is not logged with the job's id")
	}
}

// TestMiddlewareGoexitAfterNextKeepsTheOutcome: a middleware that ends its
// goroutine with runtime.Goexit (t.FailNow) once the handler returned
// keeps the handler's outcome, as a panic there does: a success commits
// once, with its output, instead of a retry that would run the handler's
// effect again, and a permanent failure stays one. The Goexit is logged
// with the job's id and counted as a panic.
func TestMiddlewareGoexitAfterNextKeepsTheOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			_ = next(ctx, job)
			runtime.Goexit()
			return nil
		}
	}}
	p := e.pool(cfg)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		calls.Add(1)
		if j.Args.FailTimes > 0 {
			return jobs.Permanent(errors.New("refused"))
		}
		return jobs.RecordOutput(ctx, "done")
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	ok := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", ok.JobID, jobs.Succeeded)
	if rec.Attempts != 1 || string(rec.Output) != `"done"` {
		t.Fatalf("succeeded after %d attempts with output %s, want 1 with \"done\"", rec.Attempts, rec.Output)
	}
	failed := e.enqueue(wrappedArgs{FailTimes: 1}, jobs.MaxRetries(1))
	rec = jobstest.WaitState(t, e.ledger, "default", failed.JobID, jobs.Dead)
	if rec.Attempts != 1 || rec.Reason != "permanent error" || !strings.Contains(rec.Error, "refused") {
		t.Fatalf("failed job: %d attempts, reason %q, error %q: want the handler's permanent error", rec.Attempts, rec.Reason, rec.Error)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the handler ran %d times for two jobs", n)
	}
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 2 {
		t.Fatalf("panics metric %v, want 2", v)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "middleware ended its goroutine after the handler returned") || !strings.Contains(logs, ok.JobID) {
		t.Fatal("the middleware's Goexit is not logged with the job's id")
	}
}

// TestNextAfterTheHandlerRanIsRefused: a middleware calling next a second
// time, or from a goroutine once the attempt ended, gets ErrAttemptEnded
// and the handler does not run again.
func TestNextAfterTheHandlerRanIsRefused(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	twice := make(chan error, 1)
	late := make(chan func() error, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			err := next(ctx, job)
			switch job.Header("mode") {
			case "twice":
				twice <- next(ctx, job)
			case "late":
				late <- func() error { return next(ctx, job) }
			}
			return err
		}
	}}
	p := e.pool(cfg)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		calls.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(wrappedArgs{}, jobs.Header("mode", "twice"))
	if err := <-twice; !errors.Is(err, worker.ErrAttemptEnded) {
		t.Fatalf("second call of next: %v, want ErrAttemptEnded", err)
	}
	if rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Succeeded); rec.Attempts != 1 {
		t.Fatalf("%d attempts", rec.Attempts)
	}
	r = e.enqueue(wrappedArgs{}, jobs.Header("mode", "late"))
	call := <-late
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Succeeded)
	if err := call(); !errors.Is(err, worker.ErrAttemptEnded) {
		t.Fatalf("next called after the attempt ended: %v, want ErrAttemptEnded", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the handler ran %d times for two jobs", n)
	}
}

// TestLeakedGoroutineCannotReport: a goroutine the handler leaked, calling
// RecordOutput or Progress after the handler returned (while middleware
// still runs, or once the attempt committed), gets ErrStale and writes
// nothing.
func TestLeakedGoroutineCannotReport(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	leaked := make(chan context.Context, 1)
	inWindow := make(chan [2]error, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			err := next(ctx, job)
			if job.Header("mode") == "window" { // the handler returned, the attempt has not ended
				hctx := <-leaked
				inWindow <- [2]error{jobs.RecordOutput(hctx, "late"), jobs.Progress(context.WithoutCancel(hctx), 2, 2, "late")}
			}
			return err
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		if err := jobs.RecordOutput(ctx, "first"); err != nil {
			return err
		}
		if err := jobs.Progress(ctx, 1, 2, "first"); err != nil {
			return err
		}
		leaked <- ctx
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	check := func(id string) {
		t.Helper()
		var out string
		if err := e.client.Output(context.Background(), "default", id, &out); err != nil || out != "first" {
			t.Fatalf("output %q (%v), want first", out, err)
		}
		rec := jobstest.WaitState(t, e.ledger, "default", id, jobs.Succeeded)
		if rec.Progress == nil || rec.Progress.Note != "first" {
			t.Fatalf("progress %+v, want the handler's", rec.Progress)
		}
	}

	r := e.enqueue(wrappedArgs{}, jobs.Header("mode", "window"))
	errs := <-inWindow
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Succeeded)
	for _, err := range errs {
		if !errors.Is(err, jobs.ErrStale) {
			t.Fatalf("a report after the handler returned: %v, want ErrStale", err)
		}
	}
	check(r.JobID)

	r = e.enqueue(wrappedArgs{})
	ctx := <-leaked
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Succeeded)
	if err := jobs.RecordOutput(ctx, "late"); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("late RecordOutput: %v, want ErrStale", err)
	}
	if err := jobs.Progress(context.WithoutCancel(ctx), 2, 2, "late"); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("late Progress: %v, want ErrStale", err)
	}
	check(r.JobID)
}
