package asynqfence_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// Environment of a helper process (an asynq server running the bridge).
const (
	envHelper = "ASYNQFENCE_HELPER" // the handler's mode: paused, kill, normal
	envName   = "ASYNQFENCE_NAME"   // the server's name (its worker id)
	envRedis  = "ASYNQFENCE_REDIS"  // Redis address (asynq and the ledger)
	envNS     = "ASYNQFENCE_NS"     // ledger namespace; also prefixes the test's keys
	envPG     = "ASYNQFENCE_PG"     // PostgreSQL URL whose search_path is the test's schema
)

// testKeys are the Redis lists through which helpers report to the test.
type testKeys struct{ ns string }

func (k testKeys) started() string         { return k.ns + ":test:started" }  // name/token when a handler starts
func (k testKeys) results() string         { return k.ns + ":test:results" }  // name:result of the fenced write
func (k testKeys) returned() string        { return k.ns + ":test:returned" } // name:what the bridge returned to asynq
func (k testKeys) proceed(n string) string { return k.ns + ":test:go:" + n }  // a paused handler waits for this

// runHelper runs an asynq server with the bridge until SIGTERM. Its handler
// writes one row per task through pgfence; mode makes it wait before the
// write (paused: the test SIGSTOPs the process there) or block after it
// (kill: the test SIGKILLs the process there).
func runHelper(mode string) {
	name, ns := os.Getenv(envName), os.Getenv(envNS)
	k := testKeys{ns}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	pool, err := pgxpool.New(ctx, os.Getenv(envPG))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	store, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// A lease far shorter than asynq's (30 s, what the tests wait for),
	// long enough that a loaded machine never loses it mid-handler.
	bridge, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{
		WorkerID: name, LeaseTTL: 10 * time.Second, EffectLog: store, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		f, _ := fence.FromContext(ctx)
		rdb.RPush(context.Background(), k.started(), fmt.Sprintf("%s/%d", name, f.Token))
		wctx := ctx
		if mode == "paused" {
			// Stopped here; woken up, it writes as a handler that ignores
			// its context would: only the fence can refuse the write.
			rdb.BLPop(context.Background(), 0, k.proceed(name))
			wctx = context.Background()
		}
		err := store.Apply(wctx, f, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO payments (op, token, worker) VALUES ($1, $2::text::numeric, $3)`,
				f.OperationID, f.Token.String(), name)
			return err
		})
		result := "applied"
		switch {
		case errors.Is(err, fence.ErrStale):
			result = "stale"
		case err != nil:
			result = "error: " + err.Error()
		}
		rdb.RPush(context.Background(), k.results(), name+":"+result)
		if mode == "kill" {
			select {}
		}
		return err
	})
	report := func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			err := next.ProcessTask(ctx, t)
			what := "ok"
			if err != nil {
				what = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
			}
			rdb.RPush(context.Background(), k.returned(), name+":"+what)
			return err
		})
	}
	mux := asynq.NewServeMux()
	mux.Use(report, bridge.Middleware())
	mux.Handle("payment", handler)
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: os.Getenv(envRedis)}, testServerConfig())
	if err := srv.Start(mux); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	rdb.RPush(context.Background(), k.ns+":test:up", name)
	<-ctx.Done()
	srv.Shutdown()
}

// testServerConfig polls often and retries at once, so tests wait only for
// what asynq fixes: its 30 s lease and its recoverer's 30 s margin.
func testServerConfig() asynq.Config {
	return asynq.Config{
		Concurrency:              2,
		Queues:                   map[string]int{"default": 1},
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 50 * time.Millisecond },
		ShutdownTimeout:          time.Second,
		LogLevel:                 asynq.ErrorLevel,
	}
}

// bridgedMux returns a ServeMux whose handlers run behind b's middleware,
// and a signal of what each delivery returned to asynq.
func bridgedMux(t *testing.T, b *asynqfence.Bridge) (*asynq.ServeMux, *testsignal.Signal[error]) {
	returned := &testsignal.Signal[error]{}
	returned.Init(t, "delivery returned to asynq")
	mux := asynq.NewServeMux()
	mux.Use(func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			err := next.ProcessTask(ctx, task)
			returned.Signal(err)
			return err
		})
	}, b.Middleware())
	return mux, returned
}
