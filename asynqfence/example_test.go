package asynqfence_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// An existing asynq handler, unchanged but for the fence it passes on.
func sendInvoice(ctx context.Context, t *asynq.Task) error {
	f, ok := fence.FromContext(ctx)
	if !ok {
		return asynqfence.ErrNoAttempt
	}
	// Write through a fenced store (fence/pgfence, fence/redisfence,
	// fence/httpfence) with f: a stale attempt's write is refused there.
	// The attempt's lease carries the same token.
	l, ok := lease.FromContext(ctx)
	fmt.Printf("sending %s under a fencing token: %v (the lease's: %v)\n", t.Payload(), f.Token > 0, ok && l.Token == f.Token)
	return nil
}

// Wrap an existing asynq server's handlers with the bridge. Tasks are still
// enqueued with a plain asynq.Client; each delivery runs as a fenced attempt
// in the fencedq ledger on the same Redis. A production server calls
// srv.Run(mux); here the server starts, delivers one task and shuts down.
// It uses REDIS_ADDR (default 127.0.0.1:6379), a private namespace and asynq
// queue, and deletes its keys at the end.
func Example() {
	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "127.0.0.1:6379"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	queue := ns + "-invoices"
	defer deleteExampleKeys(rdb, ns, queue)
	mux := asynq.NewServeMux()
	mux.Use(asynqfence.Middleware(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{
		// EffectLog: a pgfence.Store, so a redelivered task whose effect
		// happened is acknowledged instead of applied twice.
		Logger: slog.New(slog.DiscardHandler),
	}))
	mux.HandleFunc("invoice:send", sendInvoice)

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 10, Queues: map[string]int{queue: 1}, TaskCheckInterval: 100 * time.Millisecond,
		Logger: quietAsynq{}, LogLevel: asynq.ErrorLevel,
		IsFailure: asynqfence.IsFailure, // a delivery the ledger did not let run spends no retry
	})
	// done learns when a delivery finished: after the bridge committed its outcome.
	done := make(chan error, 1)
	err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := mux.ProcessTask(ctx, t)
		done <- err
		return err
	}))
	if err != nil {
		fmt.Println("asynq server:", err)
		return
	}
	defer srv.Shutdown()

	info, err := asynq.NewClientFromRedisClient(rdb).EnqueueContext(ctx,
		asynq.NewTask("invoice:send", []byte("inv-7")), asynq.Queue(queue))
	if err != nil {
		fmt.Println("enqueue:", err)
		return
	}
	select {
	case err := <-done:
		fmt.Println("handler returned:", err)
	case <-ctx.Done():
		fmt.Println("the task was not delivered")
		return
	}
	rec, err := jobs.NewInspector(rdb, jobs.Config{Namespace: ns}).Find(ctx, info.ID)
	if err != nil {
		fmt.Println("ledger:", err)
		return
	}
	fmt.Println("ledger state:", rec.State)
	// Output:
	// sending inv-7 under a fencing token: true (the lease's: true)
	// handler returned: <nil>
	// ledger state: succeeded
}

// Wrap one existing asynq.Handler (no ServeMux), enqueue one task with a
// plain asynq.Client, let an asynq server deliver it once, and read the
// job's state in the ledger. It uses REDIS_ADDR (default 127.0.0.1:6379), a
// private namespace and asynq queue, and deletes its keys at the end.
func Example_wrapHandler() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	queue := ns + "-invoices" // asynq queue, and the ledger queue of the same name
	defer deleteExampleKeys(rdb, ns, queue)
	quiet := slog.New(slog.DiscardHandler)

	// The existing handler: it learns its fence from the context.
	tokens := make(chan lease.Token, 1)
	var existing asynq.Handler = asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		f, ok := fence.FromContext(ctx)
		if !ok {
			return asynqfence.ErrNoAttempt
		}
		tokens <- f.Token
		return nil
	})

	bridged := asynqfence.Middleware(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{Logger: quiet})(existing)
	// done learns when a delivery finished: after the bridge committed its outcome.
	done := make(chan string, 1)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 1, Queues: map[string]int{queue: 1}, TaskCheckInterval: 100 * time.Millisecond,
		Logger: quietAsynq{}, LogLevel: asynq.ErrorLevel,
	})
	err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := bridged.ProcessTask(ctx, t)
		id, _ := asynq.GetTaskID(ctx)
		done <- id
		return err
	}))
	if err != nil {
		fmt.Println("asynq server:", err)
		return
	}
	defer srv.Shutdown()

	// Enqueue with a plain asynq client, as before the bridge.
	client := asynq.NewClientFromRedisClient(rdb)
	info, err := client.EnqueueContext(ctx, asynq.NewTask("invoice:send", []byte(`{"invoice":"inv-7"}`)), asynq.Queue(queue))
	if err != nil {
		fmt.Println("enqueue:", err)
		return
	}
	select {
	case token := <-tokens:
		fmt.Println("handler ran with a fencing token:", token > 0)
	case <-ctx.Done():
		fmt.Println("the task was not delivered")
		return
	}
	if id := <-done; id != info.ID {
		fmt.Println("another task was delivered:", id)
		return
	}
	// Without an operation id in the task, the job's id is asynq's task id.
	rec, err := jobs.NewInspector(rdb, jobs.Config{Namespace: ns}).Find(ctx, info.ID)
	if err != nil {
		fmt.Println("ledger:", err)
		return
	}
	fmt.Println("ledger state:", rec.State)
	fmt.Println("bridged from:", rec.Bridge)
	// Output:
	// handler ran with a fencing token: true
	// ledger state: succeeded
	// bridged from: asynq
}

// quietAsynq is an asynq.Logger that drops everything.
type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(...any) {}

// deleteExampleKeys removes the example's ledger keys and its asynq queue.
func deleteExampleKeys(rdb *redis.Client, ns, queue string) {
	ctx := context.Background()
	for _, pattern := range []string{"*" + ns + "*", "asynq:{" + queue + "}:*"} {
		iter := rdb.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
	rdb.SRem(ctx, "asynq:queues", queue)
}

// Run the bridge's redelivery beside the asynq server (srv.Run(mux) in
// production): an unfinished bridged job whose asynq task is gone (a Redis
// failover rewound it, asynq archived it after its retries) gets a new task,
// whose delivery reconciles the job first. Redeliver is one pass; Run repeats
// it every Options.RedeliverInterval until its context ends. It uses
// REDIS_ADDR (default 127.0.0.1:6379) and a private namespace.
func ExampleBridge_Redeliver() {
	redisAddr := os.Getenv("REDIS_ADDR")
	if redisAddr == "" {
		redisAddr = "127.0.0.1:6379"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	defer deleteExampleKeys(rdb, ns, ns)
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()

	n, err := b.Redeliver(ctx) // nothing bridged yet
	fmt.Println("new tasks:", n, err)
	stop()
	fmt.Println("Run returned:", <-done)
	// Output:
	// new tasks: 0 <nil>
	// Run returned: context canceled
}
