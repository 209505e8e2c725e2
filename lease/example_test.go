package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

// exampleClient returns a client for REDIS_ADDR or the local default server.
func exampleClient() *redis.Client {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

func Example() {
	ctx := context.Background()
	rdb := exampleClient()
	defer rdb.Close()
	ns := "example-" + fmt.Sprint(time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	m := lease.NewManager(rdb, lease.Config{Namespace: ns})

	l, err := m.Acquire(ctx, "account:42", "worker-a", 10*time.Second)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// A second owner is refused while the lease is live.
	_, err = m.Acquire(ctx, "account:42", "worker-b", 10*time.Second)
	fmt.Println("second owner held off:", errors.Is(err, lease.ErrHeld))

	// Keep the lease alive while working; stop work when ctx is cancelled.
	s, _ := m.KeepAlive(ctx, l, 10*time.Second)
	work := s.Context()
	_ = work // pass work (and l.Token) to the side effects
	fmt.Println("holding:", s.Err() == nil)
	_ = s.Release(ctx)

	next, _ := m.Acquire(ctx, "account:42", "worker-b", 10*time.Second)
	fmt.Println("next token is higher:", next.Token > l.Token)
	_ = m.Release(ctx, next)
	// Output:
	// second owner held off: true
	// holding: true
	// next token is higher: true
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
