package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Queues the workload uses: every transfer goes to transfersQueue; a few
// operations are also submitted to priorityQueue (the same transfer sent
// twice through different front doors).
const (
	transfersQueue = "transfers"
	priorityQueue  = "priority"
)

// workerFlags configure one worker process (the hidden `worker` command the
// chaos run starts for every slot).
type workerFlags struct {
	mode           string
	redis          string
	sentinel       string
	cluster        string
	masterName     string
	postgres       string
	proxy          string
	schema         string
	namespace      string
	id             string
	concurrency    int
	leaseTTL       time.Duration
	handlerTimeout time.Duration
	reconcile      time.Duration
	leaseWait      time.Duration
	logLevel       string
	careless       bool
	replicas       int
	idleInTx       time.Duration
}

// add defines the worker's flags on fs.
func (w *workerFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&w.mode, "mode", "fencedq", "fencedq (bank.Worker in a fencedq pool), asynq (the unfenced baseline) or asynq-bridge (bank.Worker on asynq under the asynqfence middleware)")
	fs.StringVar(&w.redis, "redis", "", "Redis address host:port")
	fs.StringVar(&w.cluster, "cluster", "", "Redis Cluster masters host:port,host:port,... (instead of --redis)")
	fs.StringVar(&w.sentinel, "sentinel", "", "Sentinel address host:port (instead of --redis: the worker follows the primary with redis.NewFailoverClient)")
	fs.StringVar(&w.masterName, "master-name", masterName, "the name the Sentinel monitors the primary under")
	fs.StringVar(&w.postgres, "postgres", "", "PostgreSQL URL")
	fs.StringVar(&w.proxy, "proxy", "", "connect to PostgreSQL through this host:port instead of the URL's")
	fs.StringVar(&w.schema, "schema", "", "the run's schema")
	fs.StringVar(&w.namespace, "namespace", "chaos", "key namespace")
	fs.StringVar(&w.id, "id", "", "worker id")
	fs.IntVar(&w.concurrency, "concurrency", 4, "jobs run at once")
	fs.DurationVar(&w.leaseTTL, "lease-ttl", 1500*time.Millisecond, "lease TTL")
	fs.DurationVar(&w.handlerTimeout, "handler-timeout", 2*time.Second, "handler timeout")
	fs.DurationVar(&w.reconcile, "reconcile-interval", 500*time.Millisecond, "the maintenance leader's interval (expiry, reconciling)")
	fs.DurationVar(&w.leaseWait, "lease-wait", 250*time.Millisecond, "wait for a busy resource before deferring")
	fs.StringVar(&w.logLevel, "log-level", "warn", "debug, info, warn or error")
	fs.IntVar(&w.replicas, "replicas", 0, "durable acknowledgements: replicas that must hold each claim, completion and lease (jobs.Durability; 0: off)")
	fs.DurationVar(&w.idleInTx, "pg-idle-in-transaction", 0, "PostgreSQL idle_in_transaction_session_timeout of the worker's connections (0: the server's)")
	fs.BoolVar(&w.careless, "careless", false, "storage calls ignore the handler's cancellation (a handler that does not honour its context)")
}

// workerMain runs one worker process until ctx ends.
func workerMain(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var w workerFlags
	w.add(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	redisFlags := 0
	for _, f := range []string{w.redis, w.sentinel, w.cluster} {
		if f != "" {
			redisFlags++
		}
	}
	if redisFlags != 1 || w.postgres == "" || w.schema == "" || w.id == "" {
		return fmt.Errorf("%w: worker needs one of --redis, --sentinel and --cluster, --postgres, --schema and --id", errUsage)
	}
	if w.mode != "fencedq" && w.mode != "asynq" && w.mode != "asynq-bridge" {
		return fmt.Errorf("%w: unknown --mode %q", errUsage, w.mode)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(w.logLevel))
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("proc", w.id)
	// A worker started while Redis restarts or PostgreSQL's answers are
	// stalled cannot start yet; it retries, as a process supervisor would
	// restart it.
	for {
		err := runWorker(ctx, w, log)
		if err == nil || ctx.Err() != nil || errors.Is(err, errUsage) {
			return err
		}
		log.Warn("worker could not start; retrying", "error", err)
		sleepCtx(ctx, 300*time.Millisecond)
	}
}

// durability is what --durable runs fencedq with: one replica must hold
// each enqueue, claim and completion, waited for up to a second.
var durability = jobs.Durability{Replicas: 1, Timeout: time.Second}

// jobsConfig is the worker's jobs.Config: its namespace and, with
// --replicas, durable acknowledgements.
func (w workerFlags) jobsConfig() jobs.Config {
	c := jobs.Config{Namespace: w.namespace}
	if w.replicas > 0 {
		c.Durability = jobs.Durability{Replicas: w.replicas, Timeout: durability.Timeout}
	}
	return c
}

// runWorker connects and runs one worker until ctx ends or it fails to start.
func runWorker(ctx context.Context, w workerFlags, log *slog.Logger) error {
	if w.cluster != "" {
		if w.mode != "fencedq" {
			return fmt.Errorf("%w: --cluster runs fencedq workers only", errUsage)
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(w.cluster, ",")})
		defer cc.Close()
		pool, err := openPool(ctx, w.postgres, w.proxy, w.concurrency+4, w.idleInTx)
		if err != nil {
			return err
		}
		defer pool.Close()
		return runFencedWorker(ctx, w, cc, pool, log)
	}
	var rdb *redis.Client
	if w.sentinel != "" {
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: w.masterName, SentinelAddrs: []string{w.sentinel}})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: w.redis})
	}
	defer rdb.Close()
	pool, err := openPool(ctx, w.postgres, w.proxy, w.concurrency+4, w.idleInTx)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch w.mode {
	case "asynq":
		return runBaselineWorker(ctx, w, rdb, pool, log)
	case "asynq-bridge":
		return runBridgeWorker(ctx, w, rdb, pool, log)
	}
	return runFencedWorker(ctx, w, rdb, pool, log)
}

// openPool connects to PostgreSQL at url, or through the proxy at proxyAddr.
func openPool(ctx context.Context, url, proxyAddr string, maxConns int, idleInTx time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL URL: %v", errUsage, err)
	}
	if proxyAddr != "" {
		host, port, err := net.SplitHostPort(proxyAddr)
		if err != nil {
			return nil, fmt.Errorf("%w: --proxy: %v", errUsage, err)
		}
		p, _ := strconv.ParseUint(port, 10, 16)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
		cfg.ConnConfig.Fallbacks = nil
	}
	if idleInTx > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(idleInTx.Milliseconds(), 10)
	}
	cfg.MaxConns = int32(maxConns)
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres does not answer: %w", err)
	}
	return pool, nil
}

// runFencedWorker runs bank.Worker in a fencedq pool over
// bank.PostgresStore until ctx ends.
func runFencedWorker(ctx context.Context, w workerFlags, rdb redis.UniversalClient, pool *pgxpool.Pool, log *slog.Logger) error {
	store, err := newRecordingStore(ctx, pool, w.schema, w.id, w.careless)
	if err != nil {
		return err
	}
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs:           w.jobsConfig(),
		Concurrency:    w.concurrency,
		Queues:         map[string]int{transfersQueue: 1, priorityQueue: 2},
		LeaseTTL:       w.leaseTTL,
		HandlerTimeout: w.handlerTimeout,
		LeaseWait:      w.leaseWait,
		WorkerID:       w.id,
		Logger:         log,
		Maintenance:    worker.MaintenanceConfig{Interval: w.reconcile, EffectLog: store},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := worker.Register(p, &bank.Worker{Store: store}); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	steps, err := newStepWorker(pool, w.schema, w.id, w.careless)
	if err != nil {
		return err
	}
	if err := worker.Register(p, jobs.Worker[wfStep](steps)); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return p.Run(ctx)
}

// Baseline: what a careful asynq user writes without fencing. asynq's own
// lease (30s, recovered by a one-minute recoverer) decides who runs a task;
// the handler debits and credits in one transaction and records the
// application, with no token and no effect log.

// baselineRetryDelay mirrors the fencedq pool's default: exponential from
// 1s with jitter.
func baselineRetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	d := time.Second << min(n, 9)
	d = min(d, 5*time.Minute)
	return d/2 + rand.N(d/2+1)
}

// runBaselineWorker runs the unfenced asynq handler until ctx ends.
func runBaselineWorker(ctx context.Context, w workerFlags, rdb *redis.Client, pool *pgxpool.Pool, log *slog.Logger) error {
	s := qschema(w.schema)
	accounts := s + ".bank_accounts"
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              w.concurrency,
		Queues:                   map[string]int{baselineQueue(w.namespace, transfersQueue): 1, baselineQueue(w.namespace, priorityQueue): 2},
		RetryDelayFunc:           baselineRetryDelay,
		TaskCheckInterval:        100 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		ShutdownTimeout:          10 * time.Second,
		LogLevel:                 asynq.ErrorLevel,
	})
	handler := func(ctx context.Context, t *asynq.Task) error {
		var tr bank.Transfer
		if err := json.Unmarshal(t.Payload(), &tr); err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		if w.careless {
			ctx = context.WithoutCancel(ctx)
		}
		op, _ := asynq.GetTaskID(ctx)
		queue, _ := asynq.GetQueueName(ctx)
		retry, _ := asynq.GetRetryCount(ctx)
		_, _ = pool.Exec(ctx, `INSERT INTO `+s+`.chaos_attempts (operation_id, queue, retry, worker) VALUES ($1, $2, $3, $4)`,
			op, queue, retry, w.id)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = balance - $2 WHERE id = $1 AND balance >= $2`, tr.From, tr.Cents)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("%w: %s cannot cover %d: %w", bank.ErrInsufficientFunds, tr.From, tr.Cents, asynq.SkipRetry)
			}
			if _, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = balance + $2 WHERE id = $1`, tr.To, tr.Cents); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO `+s+`.chaos_applied (operation_id, queue, retry, worker, txid)
				VALUES ($1, $2, $3, $4, txid_current())`, op, queue, retry, w.id)
			return err
		})
		if err != nil && !errors.Is(err, asynq.SkipRetry) {
			log.Warn("transfer failed; asynq retries it", "operation_id", op, "retry", retry, "error", err)
		}
		return err
	}
	if err := srv.Start(asynq.HandlerFunc(handler)); err != nil {
		return fmt.Errorf("asynq server: %w", err)
	}
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// baselineQueue names the asynq queue of the baseline for a workload queue.
func baselineQueue(namespace, q string) string { return namespace + "-" + q }
