package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestRunSaysRedisRefusedTheCredentials: a pool given a password-protected
// Redis without its password, or with a wrong one, fails Run at once
// saying the server at its address refused the credentials and where to
// set them, matching ErrRedisUnusable, not "worker: jobs: partitions:
// NOAUTH Authentication required."; Run may be called again. An ACL user
// without the pool's commands is told so too.
func TestRunSaysRedisRefusedTheCredentials(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	admin := srv.Client()
	if err := admin.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "s3cret"})
		_ = rdb.ConfigSet(context.Background(), "requirepass", "").Err()
		_ = rdb.Close()
	})
	for _, pw := range []string{"", "hunter2-x9"} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: pw})
		t.Cleanup(func() { _ = rdb.Close() })
		p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t)}})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			err = p.Run(context.Background())
			if !errors.Is(err, worker.ErrRedisUnusable) || !redis.IsAuthError(err) ||
				!strings.HasPrefix(err.Error(), "worker: Redis at "+srv.Addr+" refused the pool's credentials") ||
				!strings.Contains(err.Error(), "Password") || strings.Contains(err.Error(), "partitions") {
				t.Fatalf("password %q: Run: %v; want it to say Redis at %s refused the credentials and where to set them", pw, err, srv.Addr)
			}
		}
		if pw != "" && strings.Contains(err.Error(), pw) {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
	// An ACL user let in but not granted the pool's commands.
	if err := admin.Do(context.Background(), "ACL", "SETUSER", "limited", "on", ">pw", "~*", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "limited", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t)}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background())
	if !errors.Is(err, worker.ErrRedisUnusable) || !redis.IsPermissionError(err) ||
		!strings.HasPrefix(err.Error(), "worker: Redis at "+srv.Addr+" refused a command or key to the pool's user") {
		t.Fatalf("Run as a user without the pool's commands: %v; want it to name the missing permission", err)
	}
}
