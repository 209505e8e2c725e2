package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
)

// The asynq bridge mode (--baseline asynq-bridge): the baseline's asynq
// servers, client, queues, retries and lease, with the bank transfer
// handler (bank.Worker over the fenced bank.PostgresStore, the same one the
// fencedq mode runs) wrapped by the asynqfence middleware. asynq still
// decides when a task is delivered; the bridge's ledger attempt, its token
// and the pgfence effect log decide whether the transfer may happen.

// bridgeEnqueuer submits through a plain asynq.Client, as the baseline
// does (task id = operation id, retained after completion), with the
// operation id also in the task's asynqfence.OperationHeader, so that the
// ledger job is the operation in every queue it was sent to.
func bridgeEnqueuer(c *asynq.Client, namespace string, timeout time.Duration) enqueuer {
	return func(ctx context.Context, op *operation, queue string) (string, bool, error) {
		t, err := asynqfence.NewTask(op.Args, op.ID)
		if err != nil {
			return "", false, err
		}
		_, err = c.EnqueueContext(ctx, t,
			asynq.TaskID(op.ID), asynq.Queue(baselineQueue(namespace, queue)),
			asynq.MaxRetry(jobs.DefaultMaxRetries), asynq.Timeout(timeout), asynq.Retention(24*time.Hour))
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return op.ID, true, nil
		}
		if err != nil {
			return "", false, err
		}
		return op.ID, false, nil
	}
}

// runBridgeWorker runs an asynq server whose transfer handler is bank.Worker
// under the asynqfence middleware, and the bridge's redelivery of jobs whose
// task is gone (Bridge.Run), until ctx ends.
func runBridgeWorker(ctx context.Context, w workerFlags, rdb *redis.Client, pool *pgxpool.Pool, log *slog.Logger) error {
	store, err := newRecordingStore(ctx, pool, w.schema, w.id, w.careless)
	if err != nil {
		return err
	}
	prefix := w.namespace + "-"
	b, err := asynqfence.New(rdb, w.jobsConfig(), asynqfence.Options{
		WorkerID:  w.id,
		LeaseTTL:  w.leaseTTL,
		Queue:     func(q string) string { return strings.TrimPrefix(q, prefix) },
		EffectLog: store,
		Logger:    log,
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	mux := asynq.NewServeMux()
	mux.Use(b.Middleware())
	asynqfence.Handle(mux, &bank.Worker{Store: store})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              w.concurrency,
		Queues:                   map[string]int{baselineQueue(w.namespace, transfersQueue): 1, baselineQueue(w.namespace, priorityQueue): 2},
		RetryDelayFunc:           baselineRetryDelay,
		TaskCheckInterval:        100 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		ShutdownTimeout:          10 * time.Second,
		LogLevel:                 asynq.ErrorLevel,
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("asynq server: %w", err)
	}
	// Jobs whose asynq task a failover erased (or asynq archived while the
	// job was unfinished) get a new task.
	_ = b.Run(ctx)
	srv.Shutdown()
	return nil
}
