package worker_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRetryDelayGoexitKeepsTheOutcome: a RetryDelay that ends its
// goroutine with runtime.Goexit (t.Fatal in a test's delay function) is
// called once for the attempt, as one that panics is: the handler's
// outcome stands (a retry of its error) with the default delay, the
// attempt's slot frees, and its job is neither decided again (as a Goexit
// of the handler, calling RetryDelay a second time, which ended the
// goroutine again and left the job running under renewed leases) nor
// left running.
func TestRetryDelayGoexitKeepsTheOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 1
	var delays atomic.Int32
	cfg.RetryDelay = func(n int) time.Duration {
		if n == 1 {
			delays.Add(1)
			runtime.Goexit()
		}
		return 0
	}
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		if j.Args.N == 1 && j.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	}))
	e.start(p)
	first := e.enqueue(plainArgs{N: 1})
	rec := jobstest.WaitState(t, e.ledger, "default", first.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("the job took %d attempts, want 2 (the handler's retry)", rec.Attempts)
	}
	if n := delays.Load(); n != 1 {
		t.Fatalf("RetryDelay called %d times for the first attempt, want 1", n)
	}
	next := e.enqueue(plainArgs{N: 2})
	jobstest.WaitState(t, e.ledger, "default", next.JobID, jobs.Succeeded)
	logs := e.logs.String()
	if !strings.Contains(logs, "RetryDelay ended its goroutine") || !strings.Contains(logs, first.JobID) {
		t.Fatal("the RetryDelay's Goexit is not logged with the job's id")
	}
	if strings.Contains(logs, "handler ended its goroutine") {
		t.Fatal("a Goexit in RetryDelay is logged as the handler's")
	}
}

// TestHandlerAndRetryDelayGoexit: a handler that ends its goroutine with
// runtime.Goexit, whose retry's RetryDelay ends it again, still hands its
// attempt over: retried with the default delay, counted once, its slot
// freed, instead of left running under renewed leases.
func TestHandlerAndRetryDelayGoexit(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 1
	var delays atomic.Int32
	cfg.RetryDelay = func(n int) time.Duration {
		if n == 1 {
			delays.Add(1)
			runtime.Goexit()
		}
		return 0
	}
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		if j.Args.N == 1 && j.Attempt == 1 {
			runtime.Goexit()
		}
		return nil
	}))
	e.start(p)
	first := e.enqueue(plainArgs{N: 1})
	rec := jobstest.WaitState(t, e.ledger, "default", first.JobID, jobs.Succeeded)
	if rec.Attempts != 2 {
		t.Fatalf("the job took %d attempts, want 2 (a retry)", rec.Attempts)
	}
	if n := delays.Load(); n != 1 {
		t.Fatalf("RetryDelay called %d times for the first attempt, want 1", n)
	}
	next := e.enqueue(plainArgs{N: 2})
	jobstest.WaitState(t, e.ledger, "default", next.JobID, jobs.Succeeded)
	if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 1 {
		t.Fatalf("panics metric %v, want 1", v)
	}
}
