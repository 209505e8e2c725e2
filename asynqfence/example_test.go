package asynqfence_test

import (
	"context"
	"log"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
)

// An existing asynq handler, unchanged but for the fence it passes on.
func sendInvoice(ctx context.Context, t *asynq.Task) error {
	f, ok := fence.FromContext(ctx)
	if !ok {
		return asynqfence.ErrNoAttempt
	}
	// Write through a fenced store (fence/pgfence, fence/redisfence,
	// fence/httpfence) with f: a stale attempt's write is refused there.
	_ = f
	return nil
}

// Wrap an existing asynq server's handlers with the bridge. Tasks are still
// enqueued with a plain asynq.Client; each delivery runs as a fenced attempt
// in the fencedq ledger on the same Redis.
func Example() {
	redisAddr := "127.0.0.1:6379"
	ledger := jobs.NewLedger(redis.NewClient(&redis.Options{Addr: redisAddr}), jobs.Config{})

	mux := asynq.NewServeMux()
	mux.Use(asynqfence.Middleware(ledger, asynqfence.Options{
		// EffectLog: a pgfence.Store, so a redelivered task whose effect
		// happened is acknowledged instead of applied twice.
	}))
	mux.HandleFunc("invoice:send", sendInvoice)

	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: redisAddr}, asynq.Config{Concurrency: 10})
	if err := srv.Run(mux); err != nil {
		log.Fatal(err)
	}
}
