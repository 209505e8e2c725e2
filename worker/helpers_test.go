package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// env is one test's Redis, namespace, client, metrics and captured logs.
type env struct {
	t      *testing.T
	rdb    redis.UniversalClient
	ns     string
	client *jobs.Client
	ledger *ledger.Ledger
	reg    *prometheus.Registry
	logs   *syncbuf.Buffer
}

func newEnv(t *testing.T) *env {
	rdb, ns := redistest.New(t)
	return newEnvOn(t, rdb, ns)
}

func newEnvOn(t *testing.T, rdb redis.UniversalClient, ns string) *env {
	reg := prometheus.NewRegistry()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Registerer: reg})
	e := &env{t: t, rdb: rdb, ns: ns, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns}), reg: reg, logs: &syncbuf.Buffer{}}
	t.Cleanup(func() {
		_ = c.Close()
		if t.Failed() {
			t.Logf("pool logs:\n%s", tail(e.logs.String(), 20))
		}
	})
	return e
}

// config returns a pool config with short, test-friendly timings.
func (e *env) config() worker.Config {
	return worker.Config{
		Jobs:            jobs.Config{Namespace: e.ns},
		Concurrency:     4,
		LeaseTTL:        time.Second,
		HandlerTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		RetryDelay:      func(int) time.Duration { return 50 * time.Millisecond },
		Logger:          slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:      e.reg,
		Maintenance:     worker.MaintenanceConfig{Interval: 100 * time.Millisecond, MaxReconcileTries: 3},
	}
}

// start runs pool p until the test ends and returns a stop function that
// shuts it down and waits.
func (e *env) start(p *worker.Pool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("pool.Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				e.t.Error("pool did not stop within 30s")
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) pool(cfg worker.Config) *worker.Pool {
	p, err := worker.NewPool(e.rdb, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (e *env) enqueue(args jobs.JobArgs, opts ...jobs.Option) *jobs.Result {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), args, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// waitReported waits until the pool's completer has reported n outcomes. A
// job's new state is in the ledger before the completer counts and logs
// its outcome, so a test that reads those waits for the report.
func waitReported(hooks worker.Hooks, n int) {
	for got := 0; got < n; {
		got += len(hooks.Committed.WaitOrTimeout())
	}
}
