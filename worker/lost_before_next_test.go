package worker_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// waitingMiddleware waits before next until the handler's context ends (a
// semaphore that never frees), signalling waiting first, and returns the
// context's error without calling next, sending what JobView.Outcome
// says of it to outcomes.
func waitingMiddleware(waiting chan<- struct{}, outcomes chan<- string) worker.Middleware {
	return func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			waiting <- struct{}{}
			<-ctx.Done()
			outcomes <- job.Outcome(ctx.Err())
			return ctx.Err()
		}
	}
}

// TestLeaseLostBeforeNextPutsTheJobBack: a middleware still waiting before
// next when the attempt's resource lease is lost leaves a job whose handler
// never ran: it is put back, its attempt not consumed, not left uncertain
// for the resolver.
func TestLeaseLostBeforeNextPutsTheJobBack(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.Maintenance.Disabled = true
	waiting := make(chan struct{}, 2)
	outcomes := make(chan string, 2)
	cfg.Middleware = []worker.Middleware{waitingMiddleware(waiting, outcomes)}
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	var calls atomic.Int32
	if err := worker.Register(p, jobs.WorkFunc[leaseArgs](func(context.Context, *jobs.Job[leaseArgs]) error {
		calls.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	r := e.enqueue(leaseArgs{Account: "lost-before-next"})
	stop := e.start(p)
	select {
	case <-waiting:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the middleware did not run")
	}
	// Another holder takes the resource: the attempt's next renewal finds
	// its lease lost; the job's own token still runs it.
	thief := strconv.FormatInt(1<<60, 10) + " " + strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10) + " thief"
	if err := e.rdb.Set(context.Background(), e.ns+":lease:{account:lost-before-next}", thief, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	waitReported(hooks, 1)
	stop()
	if o := <-outcomes; o != worker.OutcomeRetry {
		t.Fatalf("JobView.Outcome said %s, want %s", o, worker.OutcomeRetry)
	}
	rec, err := e.ledger.Get(context.Background(), "default", r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || rec.Attempts != 0 || calls.Load() != 0 {
		t.Fatalf("job %s after %d attempts (%s: %s), handler ran %d times; want pending with its attempt not consumed",
			rec.State, rec.Attempts, rec.Reason, rec.Error, calls.Load())
	}
}

// TestDeadlineBeforeNextRetries: a middleware that waited before next past
// the handler's deadline leaves a job whose handler never ran: an ordinary
// retry, not uncertain (nothing can have been applied).
func TestDeadlineBeforeNextRetries(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	waiting := make(chan struct{}, 2)
	outcomes := make(chan string, 2)
	cfg.Middleware = []worker.Middleware{waitingMiddleware(waiting, outcomes)}
	cfg.RetryDelay = func(int) time.Duration { return time.Hour }
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(context.Context, *jobs.Job[wrappedArgs]) error {
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	r := e.enqueue(wrappedArgs{}, jobs.Timeout(200*time.Millisecond))
	stop := e.start(p)
	waitReported(hooks, 1)
	stop()
	if o := <-outcomes; o != worker.OutcomeRetry {
		t.Fatalf("JobView.Outcome said %s, want %s", o, worker.OutcomeRetry)
	}
	rec, err := e.ledger.Get(context.Background(), "default", r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || rec.Attempts != 1 {
		t.Fatalf("job %s after %d attempts (%s: %s), want pending for a retry", rec.State, rec.Attempts, rec.Reason, rec.Error)
	}
}
