package bank_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Example moves money with a fenced transfer job: accounts in Redis
// (RedisStore, through redisfence), a worker pool running bank.Worker, and
// a transfer enqueued by operation id. It needs a Redis at REDIS_ADDR
// (default 127.0.0.1:6379).
func Example() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("bank-example-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	store, err := bank.NewRedisStore(rdb, ns)
	if err != nil {
		panic(err)
	}
	if err := store.Setup(ctx, bank.Accounts(2), 1000); err != nil {
		panic(err)
	}
	show := func(label string) {
		b, err := store.Balances(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: acct-000=%d acct-001=%d total=%d\n", label, b["acct-000"], b["acct-001"], bank.Total(b))
	}
	show("before")

	pool, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	// The example waits for the handler to return, then stops the pool:
	// Run returns once every outcome it has is committed to the ledger.
	transfers := &bank.Worker{Store: store}
	ran := make(chan error, 1)
	_ = worker.Register(pool, jobs.WorkFunc[bank.Transfer](func(ctx context.Context, j *jobs.Job[bank.Transfer]) error {
		err := transfers.Work(ctx, j)
		ran <- err
		return err
	}))
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	defer client.Close()
	res, err := client.Enqueue(ctx, bank.Transfer{From: "acct-000", To: "acct-001", Cents: 250, Memo: "rent"},
		jobs.OperationID("rent-2026-06"))
	if err != nil {
		panic(err)
	}
	select {
	case <-ran:
	case <-ctx.Done():
		fmt.Println("transfer did not run:", ctx.Err())
	}
	stop()
	<-stopped // Run returns after a graceful shutdown: the outcome is committed
	rec, err := client.Inspector().Get(ctx, res.Queue, res.JobID)
	if err != nil {
		panic(err)
	}
	fmt.Println("transfer:", rec.State, "after", rec.Attempts, "attempt")
	show("after")
	// Output:
	// before: acct-000=1000 acct-001=1000 total=2000
	// transfer: succeeded after 1 attempt
	// after: acct-000=750 acct-001=1250 total=2000
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
