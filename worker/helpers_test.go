package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

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
	ledger *jobs.Ledger
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
	t.Cleanup(func() { _ = c.Close() })
	return &env{t: t, rdb: rdb, ns: ns, client: c, ledger: c.Ledger(), reg: reg, logs: &syncbuf.Buffer{}}
}

// config returns a pool config with short, test-friendly timings.
func (e *env) config() worker.Config {
	return worker.Config{
		Namespace:       e.ns,
		Concurrency:     4,
		LeaseTTL:        time.Second,
		HandlerTimeout:  5 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		RetryDelay:      func(int) time.Duration { return 50 * time.Millisecond },
		Logger:          slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:      e.reg,
		Reconciler:      worker.ReconcilerConfig{Interval: 100 * time.Millisecond, MaxTries: 3},
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

// waitState polls the ledger until job id of queue q is in state s.
func (e *env) waitState(q, id string, s jobs.State, within time.Duration) *jobs.Record {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last *jobs.Record
	for time.Now().Before(deadline) {
		r, err := e.ledger.Get(context.Background(), q, id)
		if err == nil {
			last = r
			if r.State == s {
				return r
			}
		} else if !errors.Is(err, jobs.ErrNotFound) {
			e.t.Logf("get: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last != nil {
		e.t.Fatalf("job %s: want state %s within %v, is %s (reason %q, error %q)\nlogs:\n%s", id, s, within, last.State, last.Reason, last.Error, tail(e.logs.String(), 20))
	}
	e.t.Fatalf("job %s not found", id)
	return nil
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
