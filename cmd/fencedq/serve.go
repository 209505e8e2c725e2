package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// parseQueues reads "default=1,critical=5".
func parseQueues(s string) (map[string]int, error) {
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
				return nil, fmt.Errorf("%w: queue priority %q must be a positive integer", errUsage, prio)
			}
			p = n
		}
		if err := jobs.ValidateQueue(name); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		out[name] = p
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no queues", errUsage)
	}
	return out, nil
}

// openBankStore opens the bank's storage: PostgreSQL when a URL is given,
// else Redis through redisfence.
func openBankStore(ctx context.Context, postgres string, rdb redis.UniversalClient, ns string) (bank.Store, func(), error) {
	if postgres == "" {
		s, err := bank.NewRedisStore(rdb, ns)
		return s, func() {}, err
	}
	pool, err := pgxpool.New(ctx, postgres)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --postgres: %v", errUsage, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("postgres does not answer: %w", err)
	}
	s, err := bank.NewPostgresStore(ctx, pool, pgfence.Options{})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool.Close, nil
}

// serveHTTP serves h on addr (--addr) until ctx ends; ready receives the
// bound address.
func serveHTTP(ctx context.Context, addr string, h http.Handler, ready func(string)) error {
	ln, err := listen("--addr", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	return serveOn(ctx, ln, h)
}

// serveOn serves h on ln until ctx ends.
func serveOn(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func workerCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	postgres := fs.String("postgres", "", "PostgreSQL URL for the bank's accounts (default: keep them in Redis)")
	concurrency := fs.Int("concurrency", 10, "jobs run at once")
	queues := fs.String("queues", "default=1", "queues with priorities, e.g. default=1,critical=5")
	leaseTTL := fs.Duration("lease-ttl", 10*time.Second, "lease TTL per attempt")
	timeout := fs.Duration("handler-timeout", time.Minute, "default handler timeout")
	interval := fs.Duration("reconcile-interval", time.Second, "reconciler scan interval")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics and /healthz on this address (e.g. :9100)")
	accounts := fs.Int("accounts", 0, "create this many bank accounts (acct-000...) if absent")
	initial := fs.Int64("initial-cents", 100000, "initial balance of created accounts")
	var logs logFlags
	logs.add(fs, slog.LevelInfo)
	reconcile := fs.Bool("reconciler", true, "run the reconciler in this pool (one leader per namespace acts)")
	stall := fs.String("demo-stall-memo", "", "(demo) stall forever after applying a transfer with this memo, to stage a crash")
	return func(ctx context.Context, out io.Writer) error {
		qs, err := parseQueues(*queues)
		if err != nil {
			return err
		}
		log := logs.logger(os.Stderr)
		// The metrics port is opened first: a pool that cannot be watched
		// does not start.
		var metricsLn net.Listener
		if *metricsAddr != "" {
			if metricsLn, err = listen("--metrics-addr", *metricsAddr); err != nil {
				return err
			}
			defer metricsLn.Close()
		}
		rdb, err := connectRedis(ctx, c.redis)
		if err != nil {
			return err
		}
		defer rdb.Close()
		store, closeStore, err := openBankStore(ctx, *postgres, rdb, c.namespace)
		if err != nil {
			return err
		}
		defer closeStore()
		if *accounts > 0 {
			if err := store.Setup(ctx, bank.Accounts(*accounts), *initial); err != nil {
				return err
			}
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		pool, err := worker.NewPool(rdb, worker.Config{
			Namespace: c.namespace, Concurrency: *concurrency, Queues: qs, LeaseTTL: *leaseTTL,
			HandlerTimeout: *timeout, Logger: log, Registerer: reg,
			Reconciler: worker.ReconcilerConfig{Disabled: !*reconcile, Interval: *interval, EffectLog: store},
		})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		w := &bank.Worker{Store: store}
		if *stall != "" {
			w.Store = stallingStore{Store: store, memo: *stall}
		}
		if err := worker.Register(pool, w); err != nil {
			return err
		}
		if metricsLn != nil {
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			mux.HandleFunc("/healthz", healthz(rdb))
			go func() {
				if err := serveOn(ctx, metricsLn, mux); err != nil {
					log.Error("metrics server stopped", "error", err)
				}
			}()
			log.Info("serving metrics", "addr", metricsLn.Addr().String())
		}
		fmt.Fprintf(out, "worker %s running (queues %v); Ctrl-C to stop\n", pool.ID(), qs)
		return pool.Run(ctx)
	}
}

// stallingStore stages a crash for the demo: after applying a transfer
// with the given memo it never returns, as if the process died there.
type stallingStore struct {
	bank.Store
	memo string
}

func (s stallingStore) Transfer(ctx context.Context, f fence.Fence, t bank.Transfer) error {
	err := s.Store.Transfer(ctx, f, t)
	if err == nil && t.Memo == s.memo {
		fmt.Fprintf(os.Stderr, "demo: transfer %s applied; stalling before the ledger commit\n", f.OperationID)
		select {}
	}
	return err
}

func healthz(rdb redis.UniversalClient) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := rdb.Ping(r.Context()).Err(); err != nil {
			http.Error(w, "redis: unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
}

func dashboardCmd(fs *flag.FlagSet) func(context.Context, io.Writer) error {
	var c commonFlags
	c.add(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	user := fs.String("dashboard-user", "", "user name for actions (with --dashboard-password; read-only without)")
	password := fs.String("dashboard-password", "", "password for actions")
	var logs logFlags
	logs.add(fs, slog.LevelInfo)
	return func(ctx context.Context, out io.Writer) error {
		client, closeAll, err := c.openClient(ctx)
		if err != nil {
			return err
		}
		defer closeAll()
		h, err := dashboard.New(client.Ledger(), client, dashboard.Options{Username: *user, Password: *password, Logger: logs.logger(os.Stderr)})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(newLedgerCollector(client.Ledger()))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", healthz(client.Ledger().Redis()))
		mux.Handle("/", h)
		return serveHTTP(ctx, *addr, mux, func(a string) {
			fmt.Fprintf(out, "dashboard: http://%s/\n", a)
		})
	}
}

// ledgerCollector exports the ledger's per-state counts at scrape time.
type ledgerCollector struct {
	l    *jobs.Ledger
	desc *prometheus.Desc
}

func newLedgerCollector(l *jobs.Ledger) *ledgerCollector {
	return &ledgerCollector{l: l, desc: prometheus.NewDesc("fencedq_ledger_jobs",
		"Jobs per state in the ledger, read at scrape time.", []string{"queue", "state"}, nil)}
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	qs, err := c.l.Queues(ctx)
	if err != nil {
		return
	}
	for _, q := range qs {
		counts, err := c.l.Counts(ctx, q)
		if err != nil {
			continue
		}
		for s, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), q, string(s))
		}
	}
}

// FenceOnAcquire passes through to the underlying store when it can.
func (s stallingStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if r, ok := s.Store.(bank.FenceRaiser); ok {
		return r.FenceOnAcquire(ctx, f)
	}
	return nil
}
