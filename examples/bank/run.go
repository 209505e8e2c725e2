package bank

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// WorkerConfig configures RunWorker: one worker process for transfers.
// Every zero field takes the worker package's default; AddFlags sets the
// command's defaults.
type WorkerConfig struct {
	// Redis is the Redis URL; comma-separated URLs make a Redis Cluster
	// client.
	Redis string
	// Namespace is the key namespace; it must match the producers' and the
	// dashboard's.
	Namespace string
	// Postgres, if set, is the PostgreSQL URL holding the accounts (through
	// pgfence); empty keeps them in Redis (through redisfence).
	Postgres string
	// Concurrency is the number of transfers run at once.
	Concurrency int
	// Queues maps the queues served to their priorities.
	Queues map[string]int
	// LeaseTTL is each attempt's lease duration.
	LeaseTTL time.Duration
	// HandlerTimeout bounds a transfer whose job sets no timeout.
	HandlerTimeout time.Duration
	// ShutdownTimeout is how long a shutdown waits for running transfers
	// before it cancels them; the process then takes up to
	// worker.ShutdownGrace more to commit their outcomes, so give the
	// process manager a kill timeout above both.
	ShutdownTimeout time.Duration
	// MaintenanceInterval is the maintenance leader's interval (expiry,
	// reconciling, status).
	MaintenanceInterval time.Duration
	// DisableMaintenance keeps this pool out of the maintenance leader's
	// election (some pool of the namespace must run it).
	DisableMaintenance bool
	// MetricsAddr, if set, is where /metrics and /healthz are served. It is
	// opened first: a pool that cannot be watched does not start.
	MetricsAddr string
	// Accounts, if positive, creates that many accounts (acct-000, ...)
	// with InitialCents each, when absent. Neither may be negative.
	Accounts     int
	InitialCents int64
	// Logger receives the pool's logs (default: none).
	Logger *slog.Logger
	// StallAfterMemo stages a crash (the demo's crash stage, cmd/fencedq-demo): after
	// applying a transfer whose memo is this, the worker writes a line to
	// RunWorker's output and never returns, as if the process died between
	// its effect and its ledger commit. Empty in production.
	StallAfterMemo string
}

// AddFlags defines the worker's flags on fs, bound to c, and sets c to
// their defaults.
func (c *WorkerConfig) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Redis, "redis", "redis://127.0.0.1:6379/0", "Redis URL (comma-separated URLs for a Redis Cluster; redis-sentinel://host:port[,host:port...]/master[/db] through Sentinels)")
	c.Namespace = jobs.DefaultNamespace
	fs.Var((*namespaceFlag)(&c.Namespace), "namespace", "key `namespace` (must match the producers' and the dashboard's; not empty)")
	fs.StringVar(&c.Postgres, "postgres", "", "PostgreSQL URL for the bank's accounts (default: keep them in Redis)")
	fs.IntVar(&c.Concurrency, "concurrency", 10, "transfers run at once")
	c.Queues = map[string]int{"default": 1}
	fs.Var((*queuesFlag)(&c.Queues), "queues", "`queues` with priorities, e.g. default=1,critical=5")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 10*time.Second, "lease TTL per attempt")
	fs.DurationVar(&c.HandlerTimeout, "handler-timeout", time.Minute, "default handler timeout")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", worker.DefaultShutdownTimeout, fmt.Sprintf("on SIGINT or SIGTERM, how long running transfers may finish before they are cancelled (then up to %v more to commit their outcomes: keep the process manager's kill timeout above both)", worker.ShutdownGrace))
	fs.DurationVar(&c.MaintenanceInterval, "maintenance-interval", time.Second, "maintenance leader interval (expiry, reconciling, status)")
	fs.Var((*enabledFlag)(&c.DisableMaintenance), "maintenance", "let this pool become the maintenance leader (default true; one leader per namespace acts)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve /metrics and /healthz on this address (e.g. 127.0.0.1:9100; :9100 serves every interface, as a container needs)")
	fs.IntVar(&c.Accounts, "accounts", 0, "create this many bank accounts (acct-000...) if absent")
	fs.Int64Var(&c.InitialCents, "initial-cents", 100000, "initial balance of created accounts")
}

// queuesFlag reads "default=1,critical=5" (a queue without a priority has
// priority 1).
type queuesFlag map[string]int

func (q *queuesFlag) String() string {
	if q == nil {
		return ""
	}
	parts := make([]string, 0, len(*q))
	for name, p := range *q {
		parts = append(parts, name+"="+strconv.Itoa(p))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (q *queuesFlag) Set(s string) error {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, prio, found := strings.Cut(part, "=")
		p := 1
		if found {
			n, err := strconv.Atoi(prio)
			if err != nil || n <= 0 {
				return fmt.Errorf("queue priority %q must be a positive integer", prio)
			}
			p = n
		}
		if err := jobs.ValidateQueue(name); err != nil {
			return err
		}
		out[name] = p
	}
	if len(out) == 0 {
		return errors.New("no queues")
	}
	*q = out
	return nil
}

// namespaceFlag is the --namespace flag: it refuses an empty value, which
// would otherwise run in the default namespace the flag did not name.
type namespaceFlag string

func (n *namespaceFlag) String() string {
	if n == nil {
		return ""
	}
	return string(*n)
}

func (n *namespaceFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("the namespace is empty: name the workers' namespace (%s when the flag is not given)", jobs.DefaultNamespace)
	}
	*n = namespaceFlag(s)
	return nil
}

// enabledFlag is a boolean flag that sets its negation (--maintenance=false
// sets DisableMaintenance).
type enabledFlag bool

func (e *enabledFlag) String() string {
	if e == nil {
		return "false"
	}
	return strconv.FormatBool(!bool(*e))
}

func (e *enabledFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*e = enabledFlag(!v)
	return nil
}

// IsBoolFlag lets --maintenance stand alone.
func (e *enabledFlag) IsBoolFlag() bool { return true }

// OpenStore opens the bank's storage: PostgreSQL (migrated) when
// postgresURL is set, else Redis through redisfence under namespace ns.
// The returned func releases it. A malformed URL is a usage error.
func OpenStore(ctx context.Context, postgresURL string, rdb redis.UniversalClient, ns string) (Store, func(), error) {
	if postgresURL == "" {
		s, err := NewRedisStore(rdb, ns)
		return s, func() {}, err
	}
	pool, err := pgxpool.New(ctx, postgresURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --postgres: %v", cli.ErrUsage, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("postgres does not answer: %w", err)
	}
	s, err := NewPostgresStore(ctx, pool, pgfence.Options{})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool.Close, nil
}

// RunWorker runs a worker pool for transfers until ctx ends, then shuts it
// down gracefully (running transfers get cfg.ShutdownTimeout); it
// says on out when the pool runs, and logs to cfg.Logger. An error caused
// by the configuration (a malformed URL, a setting the pool refuses, a
// negative account count or balance, said before anything connects) is a
// usage error, on which the commands exit 2; a taken metrics port or a
// Redis that does not answer is a failure (exit 1).
func RunWorker(ctx context.Context, cfg WorkerConfig, out io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		var err error
		if metricsLn, err = cli.Listen("--metrics-addr", cfg.MetricsAddr); err != nil {
			return err
		}
		defer metricsLn.Close()
	}
	rdb, err := cli.ConnectRedis(ctx, cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	store, closeStore, err := OpenStore(ctx, cfg.Postgres, rdb, cfg.Namespace)
	if err != nil {
		return err
	}
	defer closeStore()
	if cfg.Accounts > 0 {
		if err := store.Setup(ctx, Accounts(cfg.Accounts), cfg.InitialCents); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pool, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: cfg.Namespace, Sentinel: cli.SentinelOptions(cfg.Redis)}, Concurrency: cfg.Concurrency, Queues: cfg.Queues, LeaseTTL: cfg.LeaseTTL,
		HandlerTimeout: cfg.HandlerTimeout, ShutdownTimeout: cfg.ShutdownTimeout, Logger: log, Registerer: reg,
		Maintenance: worker.MaintenanceConfig{Disabled: cfg.DisableMaintenance, Interval: cfg.MaintenanceInterval, EffectLog: store},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	w := &Worker{Store: store}
	if cfg.StallAfterMemo != "" {
		w.Store = stallingStore{Store: store, memo: cfg.StallAfterMemo, out: out}
	}
	if err := worker.Register(pool, w); err != nil {
		return err
	}
	if metricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", cli.Healthz(func(ctx context.Context) error { return rdb.Ping(ctx).Err() }))
		go func() {
			if err := cli.Serve(ctx, metricsLn, mux); err != nil {
				log.Error("metrics server stopped", "error", err)
			}
		}()
		log.Info("serving metrics", "addr", metricsLn.Addr().String())
	}
	fmt.Fprintf(out, "worker %s running (queues %s); Ctrl-C to stop\n", pool.ID(), (*queuesFlag)(&cfg.Queues))
	err = pool.Run(ctx)
	if errors.Is(err, worker.ErrUnsettled) {
		// Transfers whose handlers ignored their cancelled context were
		// recorded uncertain: the maintenance leader reconciles them, so
		// the stop is still clean (exit 0). Logged for the operator.
		log.Warn("worker stopped with transfers left to the maintenance leader", "error", err)
		return nil
	}
	return err
}

// check refuses, as usage errors naming their flags, the settings no
// worker or account can use, before anything connects.
func (c WorkerConfig) check() error {
	switch {
	case c.Accounts < 0:
		return fmt.Errorf("%w: --accounts %d is negative", cli.ErrUsage, c.Accounts)
	case c.InitialCents < 0:
		return fmt.Errorf("%w: --initial-cents %d is negative: an account's balance never is", cli.ErrUsage, c.InitialCents)
	}
	if err := (jobs.Config{Namespace: c.Namespace}).Validate(); err != nil {
		return fmt.Errorf("%w: --namespace: %v", cli.ErrUsage, err)
	}
	return nil
}

// stallingStore stages a crash: after applying a transfer with the given
// memo it never returns, as if the process died there.
type stallingStore struct {
	Store
	memo string
	out  io.Writer
}

func (s stallingStore) Transfer(ctx context.Context, f fence.Fence, t Transfer) error {
	err := s.Store.Transfer(ctx, f, t)
	if err == nil && t.Memo == s.memo {
		fmt.Fprintf(s.out, "transfer %s applied; stalling before the ledger commit\n", f.OperationID)
		select {}
	}
	return err
}

// FenceOnAcquire passes through to the underlying store when it can.
func (s stallingStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if r, ok := s.Store.(FenceRaiser); ok {
		return r.FenceOnAcquire(ctx, f)
	}
	return nil
}
