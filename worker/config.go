package worker

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
)

// Config configures a Pool. Every zero field takes the default documented
// on it.
type Config struct {
	// Namespace prefixes every key; it must match the jobs.Client's
	// (default "fq").
	Namespace string
	// Concurrency is the number of jobs run at once (default 10).
	Concurrency int
	// Queues maps queue names to priorities (default {"default": 1}).
	Queues map[string]int
	// StrictPriority drains higher-priority queues first (default false:
	// weighted).
	StrictPriority bool
	// LeaseTTL is each attempt's lease duration, renewed every LeaseTTL/3
	// while the handler runs (default 10s, well under asynq's 30s). A crashed
	// worker's job is detected within LeaseTTL + Reconciler.Interval.
	LeaseTTL time.Duration
	// HandlerTimeout bounds a handler when the job sets no timeout
	// (default 1m).
	HandlerTimeout time.Duration
	// ShutdownTimeout is how long Run waits for running handlers after its
	// context ends (default 10s).
	ShutdownTimeout time.Duration
	// LeaseWait is how long a delivery waits for a resource held by another
	// job before it is deferred and redelivered later (default 1s).
	LeaseWait time.Duration
	// Retention is how long finished jobs are kept (default 7 days).
	Retention time.Duration
	// RetryDelay gives the delay before retry n (default: exponential from
	// 1s, capped at 5m, with jitter).
	RetryDelay func(n int) time.Duration
	// WorkerID names this pool in lease owners and logs (default
	// hostname-pid-random).
	WorkerID string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the pool's Prometheus metrics (default: none are
	// exported; the global registry is never used).
	Registerer prometheus.Registerer
	// Reconciler configures the reconciler that runs inside the pool.
	Reconciler ReconcilerConfig
}

// ReconcilerConfig configures the reconciler.
type ReconcilerConfig struct {
	// Disabled turns the reconciler off in this pool (another pool, or the
	// fencedq command, must run one).
	Disabled bool
	// Interval between scans (default 1s).
	Interval time.Duration
	// MaxTries is how many "cannot tell" answers send a job to review
	// (default 5); tries back off exponentially from Interval.
	MaxTries int
	// EffectLog, when set, answers for kinds without a Reconcile method:
	// an operation id found in the log was applied.
	EffectLog fence.EffectLog
}

func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		c.Namespace = "fq"
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 10
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{jobs.DefaultQueue: 1}
	}
	for q, prio := range c.Queues {
		if err := jobs.ValidateQueue(q); err != nil {
			return c, err
		}
		if prio <= 0 {
			return c, fmt.Errorf("worker: queue %q priority %d must be positive", q, prio)
		}
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.LeaseTTL < 100*time.Millisecond {
		return c, fmt.Errorf("worker: lease TTL %v below 100ms", c.LeaseTTL)
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = time.Minute
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.LeaseWait <= 0 {
		c.LeaseWait = time.Second
	}
	if c.RetryDelay == nil {
		c.RetryDelay = defaultRetryDelay
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:6])
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Reconciler.Interval <= 0 {
		c.Reconciler.Interval = time.Second
	}
	if c.Reconciler.MaxTries <= 0 {
		c.Reconciler.MaxTries = 5
	}
	return c, nil
}

func defaultRetryDelay(n int) time.Duration {
	d := time.Second << min(n, 9)
	d = min(d, 5*time.Minute)
	return d/2 + rand.N(d/2+1)
}
