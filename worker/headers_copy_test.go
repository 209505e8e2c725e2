package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestHandlerWritesItsOwnHeaders: a handler writing to j.Headers (from a
// goroutine of its own too) writes its own copy: a middleware reading the
// job's headers meanwhile does not race with it (concurrent map access
// would crash the process) and still reads the headers the job was
// enqueued with.
func TestHandlerWritesItsOwnHeaders(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Disabled = true
	seen := make(chan string, 1)
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			done := make(chan error, 1)
			go func() { done <- next(ctx, job) }()
			for {
				_ = job.Header("tenant") // read while the handler writes
				select {
				case err := <-done:
					seen <- job.Header("tenant")
					return err
				default:
				}
			}
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[wrappedArgs](func(ctx context.Context, j *jobs.Job[wrappedArgs]) error {
		for i := range 1000 {
			j.Headers["tenant"] = "handler"
			j.Headers["n"] = string(rune('a' + i%26))
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	e.enqueue(wrappedArgs{}, jobs.Header("tenant", "acme"))
	select {
	case got := <-seen:
		if got != "acme" {
			t.Fatalf("the middleware read header tenant %q after the handler wrote its own, want the job's %q", got, "acme")
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the job did not run")
	}
}
