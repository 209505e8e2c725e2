package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// lookupError is an error type whose Error method reads its receiver.
type lookupError struct{ key string }

func (e *lookupError) Error() string { return "no such key " + e.key }

// TestNilPointerErrorIsAPanic: a handler that returns a nil pointer of an
// error type whose Error method dereferences it (the typed-nil error
// every Go programmer writes once) has its attempt ended as a panic is:
// logged with the job id, counted, retried, with or without middleware,
// instead of crashing the process with every attempt it runs.
func TestNilPointerErrorIsAPanic(t *testing.T) {
	for _, mw := range []bool{false, true} {
		e := newEnv(t)
		cfg := e.config()
		if mw {
			cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
				return func(ctx context.Context, job worker.JobView) error { return next(ctx, job) }
			}}
		}
		p := e.pool(cfg)
		var calls atomic.Int32
		if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
			if calls.Add(1) == 1 {
				var missing *lookupError
				return missing
			}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		e.start(p)
		res := e.enqueue(plainArgs{N: 1})
		rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
		if rec.Attempts != 2 {
			t.Fatalf("middleware %v: succeeded after %d attempts, want 2 (a retry)", mw, rec.Attempts)
		}
		if v := testutil.ToFloat64(e.metric("fencedq_handler_panics_total")); v != 1 {
			t.Fatalf("middleware %v: panics metric %v, want 1", mw, v)
		}
		if logs := e.logs.String(); !strings.Contains(logs, "handler panicked") || !strings.Contains(logs, res.JobID) {
			t.Fatalf("middleware %v: the broken error was not logged as a panic with the job id", mw)
		}
	}
}
