package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type endedArgs struct{}

func (endedArgs) Kind() string { return "ended-context" }

// reconcilingWorker counts its calls; its Reconcile makes a dependency's
// timeout leave a job uncertain.
type reconcilingWorker struct{ calls atomic.Int32 }

func (w *reconcilingWorker) Work(ctx context.Context, _ *jobs.Job[endedArgs]) error {
	w.calls.Add(1)
	return ctx.Err() // a dependency call cut off by the context
}

func (w *reconcilingWorker) Reconcile(context.Context, *jobs.Job[endedArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// TestNextRefusesAContextAlreadyEnded: a middleware that hands next a
// context of its own deriving that already ended (cancelled, or a timeout
// of 0 from a setting left unset) gets ErrContextEnded, the handler not
// run: a handler started under a dead context can do nothing but fail,
// and a kind that can be reconciled would be left uncertain (a dependency
// timed out) though nothing ran. The attempt ends as the middleware's
// error says: a retry, never uncertain.
func TestNextRefusesAContextAlreadyEnded(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	nexts := make(chan error, 2)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			var cancel context.CancelFunc
			switch job.Header("mode") {
			case "cancelled":
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			case "timeout0":
				ctx, cancel = context.WithTimeout(ctx, 0)
				defer cancel()
			}
			err := next(ctx, job)
			nexts <- err
			return err
		}
	}}
	p := e.pool(cfg)
	w := &reconcilingWorker{}
	if err := worker.Register[endedArgs](p, w); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	for _, mode := range []string{"cancelled", "timeout0"} {
		r := e.enqueue(endedArgs{}, jobs.Header("mode", mode), jobs.MaxRetries(0))
		if err := <-nexts; !errors.Is(err, worker.ErrContextEnded) {
			t.Errorf("%s: next returned %v, want ErrContextEnded", mode, err)
		}
		rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Dead)
		if rec.State != jobs.Dead || !strings.Contains(rec.Error, worker.ErrContextEnded.Error()) {
			t.Errorf("%s: job %s (error %q, reason %q), want dead with ErrContextEnded: nothing ran", mode, rec.State, rec.Error, rec.Reason)
		}
	}
	if n := w.calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times under a context that had already ended", n)
	}
}
