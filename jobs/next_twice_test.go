package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestEnqueueMiddlewareNextRunsOnce: an enqueue middleware calling next a
// second time (a retry loop, say), or from a goroutine after the enqueue
// returned, gets ErrNextCalled and writes nothing: the call's jobs are
// written once, under the first call's results.
func TestEnqueueMiddlewareNextRunsOnce(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	second := make(chan error, 1)
	var late func() error
	twice := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			res, err := next(ctx, reqs)
			if reqs[0].Queue == "twice" {
				again, err2 := next(ctx, reqs)
				if again != nil {
					err2 = errors.New("a second call returned results")
				}
				second <- err2
			}
			late = func() error { _, err := next(ctx, reqs); return err }
			return res, err
		}
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{twice}})
	res, err := c.EnqueueMany(ctx, []jobs.Params{
		{Args: accountArgs{Account: "a"}, Options: []jobs.Option{jobs.Queue("twice")}},
		{Args: accountArgs{Account: "b"}, Options: []jobs.Option{jobs.Queue("twice")}},
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("EnqueueMany: %v, %v", res, err)
	}
	if err := <-second; !errors.Is(err, jobs.ErrNextCalled) {
		t.Fatalf("second call of next: %v, want ErrNextCalled", err)
	}
	if err := late(); !errors.Is(err, jobs.ErrNextCalled) {
		t.Fatalf("next called after the enqueue returned: %v, want ErrNextCalled", err)
	}
	if n, err := c.Inspector().Counts(ctx, "twice"); err != nil || n[jobs.Pending] != 2 {
		t.Fatalf("queue twice: %v jobs (%v), want the 2 written once", n, err)
	}
}
