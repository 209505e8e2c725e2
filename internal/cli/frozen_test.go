package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestConnectRedisHonoursTheContextOnAFrozenRedis: a command on a client
// from ConnectRedis ends at its context's deadline when Redis is stopped
// (SIGSTOP), not at go-redis's read timeout.
func TestConnectRedisHonoursTheContextOnAFrozenRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb, err := cli.ConnectRedis(context.Background(), srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rdb.Get(ctx, "k").Err() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a frozen Redis answered")
		}
	case <-time.After(2 * time.Second): // go-redis's read timeout is 3 s
		t.Fatal("the command outlived its context's deadline on a frozen Redis")
	}
}
