package worker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunSaysRedisCannotBeReached: a pool whose Redis is not there says so
// in plain words, naming the address (not "jobs: partitions: dial tcp"),
// and keeps the network error for errors.Is and errors.As.
func TestRunSaysRedisCannotBeReached(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	addr := srv.Addr
	srv.Kill()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t)}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background())
	var op *net.OpError
	if err == nil || !strings.HasPrefix(err.Error(), "worker: cannot reach Redis at "+addr+" ") ||
		strings.Contains(err.Error(), "partitions") || !errors.As(err, &op) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Run: %v; want it to say Redis at %s cannot be reached, keeping the network error", err, addr)
	}
}
