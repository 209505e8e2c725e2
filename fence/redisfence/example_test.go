package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
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
	store, _ := redisfence.New(rdb, redisfence.Config{
		Namespace: fmt.Sprintf("example-%d", time.Now().UnixNano()),
		EffectTTL: time.Minute, // the default keeps effect records for 7 days
	})
	balance := store.DataKey("account:42", "balance") // in the resource's hash slot
	defer rdb.Del(ctx, balance, store.HighWaterKey("account:42"),
		store.EffectKey("account:42", "job-7"), store.IndexKey("job-7"), store.ClaimsKey("job-7"))

	// Worker B holds the newer lease (token 34) and fences on acquire.
	_ = store.FenceOnAcquire(ctx, fence.Fence{Resource: "account:42", Token: 34, Owner: "worker-b"})
	b := fence.Fence{Resource: "account:42", Token: 34, Owner: "worker-b", OperationID: "job-7"}
	fmt.Println("worker-b:", store.Apply(ctx, b, redisfence.IncrBy(balance, -500)))

	// Worker A wakes up with the expired lease (token 33): rejected.
	a := fence.Fence{Resource: "account:42", Token: 33, Owner: "worker-a", OperationID: "job-7"}
	err := store.Apply(ctx, a, redisfence.IncrBy(balance, -500))
	fmt.Println("worker-a stale:", errors.Is(err, fence.ErrStale))

	// A redelivery of the same job does not debit twice.
	err = store.Apply(ctx, b, redisfence.IncrBy(balance, -500))
	fmt.Println("again already applied:", errors.Is(err, fence.ErrAlreadyApplied))

	// The reconciler asks the effect log by operation id.
	rec, ok, _ := store.Applied(ctx, "job-7")
	fmt.Println("applied:", ok, rec.Resource, rec.Token)
	fmt.Println("balance:", rdb.Get(ctx, balance).Val())
	// Output:
	// worker-b: <nil>
	// worker-a stale: true
	// again already applied: true
	// applied: true account:42 34
	// balance: -500
}
