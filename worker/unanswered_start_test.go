package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunSaysAnUnansweringRedisDidNotAnswer: a Redis that accepts the
// connection but never answers (stopped, here with SIGSTOP) was reached:
// Run's error says it did not answer in time, keeping the network error,
// rather than that it could not be reached and asking whether it runs
// and the address is right.
func TestRunSaysAnUnansweringRedisDidNotAnswer(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	srv.Pause()
	t.Cleanup(srv.Resume)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t)}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background())
	if err == nil || strings.Contains(err.Error(), "cannot reach") || strings.Contains(err.Error(), "is it running") ||
		!strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), srv.Addr) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Run: %v; want it to say Redis at %s did not answer in time, with the network error", err, srv.Addr)
	}
}
