package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestEnqueueRefusedByRedisIsNotCalledUnreachable: an enqueue to a
// password-protected Redis without the password was refused by the
// server, yet its error said "Redis could not be reached", sending the
// reader after the address; ErrNotSent's text no longer guesses the cause,
// which the error's own text (a network error, or the server's reply) says.
func TestEnqueueRefusedByRedisIsNotCalledUnreachable(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	if err := srv.Client().ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "s3cret"})
		_ = rdb.ConfigSet(context.Background(), "requirepass", "").Err()
		_ = rdb.Close()
	})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err := jobs.NewClient(rdb, jobs.Config{Namespace: redistest.Namespace(t)}).EnqueueRaw(ctx, "k", []byte(`{}`), jobs.Unchecked())
	if !errors.Is(err, jobs.ErrNotSent) || !redis.IsAuthError(err) || strings.Contains(err.Error(), "could not be reached") ||
		!strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("EnqueueRaw: %v; want ErrNotSent with Redis's NOAUTH reply, not a claim that Redis could not be reached", err)
	}
}
