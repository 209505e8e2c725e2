package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// errorLines returns the error-level log lines naming id.
func errorLines(logs, id string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, id) {
			out = append(out, line)
		}
	}
	return out
}

// TestMiddlewarePanicWhileNextRunsIsTheMiddlewares: a middleware that
// starts next in a goroutine and then panics is logged as the
// middleware's panic (never as the handler's), and the attempt is
// uncertain with ErrHandlerStillRunning.
func TestMiddlewarePanicWhileNextRunsIsTheMiddlewares(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	started := make(chan struct{}, 1)
	late := make(chan error, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			go func() { late <- next(ctx, job) }()
			<-started
			panic("middleware gave up")
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Uncertain)
	if !strings.Contains(rec.Error, worker.ErrHandlerStillRunning.Error()) {
		t.Fatalf("record error %q: want ErrHandlerStillRunning", rec.Error)
	}
	<-late
	var mwPanic bool
	for _, line := range errorLines(e.logs.String(), r.JobID) {
		if strings.Contains(line, "handler panicked") {
			t.Fatalf("the middleware's panic is logged as the handler's: %s", line)
		}
		mwPanic = mwPanic || (strings.Contains(line, "middleware panicked") && strings.Contains(line, "middleware gave up"))
	}
	if !mwPanic {
		t.Fatalf("the middleware's panic is not logged as the middleware's:\n%s", e.logs.String())
	}
}

// TestMiddlewarePanicBeforeNextIsTheMiddlewares: a middleware panicking
// before it calls next is recovered as the middleware's panic (its log
// and the attempt's error say so), the handler does not run, and the
// attempt is retried.
func TestMiddlewarePanicBeforeNextIsTheMiddlewares(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			if job.Attempt() == 1 {
				panic("no tenant")
			}
			return next(ctx, job)
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
	r := e.enqueue(wrappedArgs{})
	rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Succeeded)
	if rec.Attempts != 2 || calls.Load() != 1 {
		t.Fatalf("%d attempts, handler ran %d times: want 2 and 1", rec.Attempts, calls.Load())
	}
	var mwPanic bool
	for _, line := range errorLines(e.logs.String(), r.JobID) {
		if strings.Contains(line, "handler panicked") {
			t.Fatalf("a middleware's panic before next is logged as the handler's: %s", line)
		}
		mwPanic = mwPanic || strings.Contains(line, "middleware panicked")
	}
	if !mwPanic {
		t.Fatalf("the middleware's panic is not logged as the middleware's:\n%s", e.logs.String())
	}
}

// TestNextRefusesAContextNotOfItsAttempt: a middleware that hands next a
// context that is not derived from its own (context.Background(), or one
// without its cancellation) gets ErrContextReplaced and the handler does
// not run without its fence or its lease-loss cancellation; the attempt
// fails with that error instead of succeeding without its handler.
func TestNextRefusesAContextNotOfItsAttempt(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	nexts := make(chan error, 2)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			switch job.Header("mode") {
			case "background":
				ctx = context.Background()
			case "nocancel":
				ctx = context.WithoutCancel(ctx)
			}
			err := next(ctx, job)
			nexts <- err
			return err
		}
	}}
	p := e.pool(cfg)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		calls.Add(1)
		if _, ok := fence.FromContext(ctx); !ok {
			return nil // a handler unaware of fencing
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	for _, mode := range []string{"background", "nocancel"} {
		r := e.enqueue(wrappedArgs{}, jobs.Header("mode", mode), jobs.MaxRetries(0))
		if err := <-nexts; !errors.Is(err, worker.ErrContextReplaced) {
			t.Fatalf("%s: next returned %v, want ErrContextReplaced", mode, err)
		}
		rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Dead)
		if !strings.Contains(rec.Error, worker.ErrContextReplaced.Error()) {
			t.Fatalf("%s: record error %q, want ErrContextReplaced", mode, rec.Error)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times under a context without its attempt", n)
	}
}

// TestNextRefusesAJobViewNotOfItsAttempt: a middleware that calls next
// with a JobView it made up, or with another attempt's, gets
// ErrForeignJobView: no job's handler runs under another attempt's
// context (and fence).
func TestNextRefusesAJobViewNotOfItsAttempt(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Concurrency = 2
	held := make(chan worker.JobView, 1)
	nexts := make(chan error, 2)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			switch job.Header("mode") {
			case "hold": // lends its view, then runs its own handler
				held <- job
				<-ctx.Done()
				return ctx.Err()
			case "zero":
				err := next(ctx, worker.JobView{})
				nexts <- err
				return err
			case "steal":
				err := next(ctx, <-held)
				nexts <- err
				return err
			}
			return next(ctx, job)
		}
	}}
	p := e.pool(cfg)
	type ran struct {
		id    string
		token lease.Token
		fence lease.Token
	}
	runs := make(chan ran, 4)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		f, _ := fence.FromContext(ctx)
		runs <- ran{id: j.ID, token: j.Token, fence: f.Token}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	zero := e.enqueue(wrappedArgs{}, jobs.Header("mode", "zero"), jobs.MaxRetries(0))
	if err := <-nexts; !errors.Is(err, worker.ErrForeignJobView) {
		t.Fatalf("next with a zero JobView: %v, want ErrForeignJobView", err)
	}
	jobstest.WaitState(t, e.ledger, "default", zero.JobID, jobs.Dead)

	holder := e.enqueue(wrappedArgs{}, jobs.Header("mode", "hold"))
	thief := e.enqueue(wrappedArgs{}, jobs.Header("mode", "steal"), jobs.MaxRetries(0))
	if err := <-nexts; !errors.Is(err, worker.ErrForeignJobView) {
		t.Fatalf("next with another attempt's JobView: %v, want ErrForeignJobView", err)
	}
	jobstest.WaitState(t, e.ledger, "default", thief.JobID, jobs.Dead)
	if _, err := e.client.Cancel(context.Background(), "default", holder.JobID, "test", "test ends"); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, "default", holder.JobID, jobs.Cancelled)
	close(runs)
	for r := range runs {
		t.Errorf("a handler ran for job %s with token %s under fence %s (holder %s, thief %s)", r.id, r.token, r.fence, holder.JobID, thief.JobID)
	}
}

// TestNextAfterTheLeaseWasLostRefuses: a middleware that waits past its
// attempt's lease before calling next (the job moved on) does not get the
// handler run under the lapsed claim: next returns an error matching
// lease.ErrLost.
func TestNextAfterTheLeaseWasLostRefuses(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300e6
	cfg.Maintenance.Disabled = true
	waiting := make(chan struct{})
	nexts := make(chan error, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			close(waiting)
			<-ctx.Done() // past the lease, ignoring it
			err := next(ctx, job)
			nexts <- err
			return nil
		}
	}}
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		calls.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	job := e.enqueue(wrappedArgs{})
	e.start(p)
	<-waiting
	if err := e.rdb.HSet(context.Background(), e.ledger.JobKey("default", job.JobID), "token", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-nexts; !errors.Is(err, lease.ErrLost) {
		t.Fatalf("next after the lease was lost: %v, want lease.ErrLost", err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times after its lease was lost", n)
	}
	hooks.Committed.WaitOrTimeout()
	rec, err := e.ledger.Get(context.Background(), "default", job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State == jobs.Succeeded {
		t.Fatal("the stale holder's attempt was committed as succeeded")
	}
}
