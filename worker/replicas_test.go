package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// recordingHandler keeps every record logged and closes started when the
// pool logs its start.
type recordingHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
	started chan struct{}
	once    *sync.Once
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.records = append(*h.records, r.Clone())
	h.mu.Unlock()
	if r.Message == "pool started" {
		h.once.Do(func() { close(h.started) })
	}
	return nil
}

// TestRunSaysTooFewReplicasAreConnected: a pool whose Durability asks for
// more replicas than the primary has (here a primary with none) would fail
// every durable claim and completion; its start says so at error level,
// with both counts, and the pool starts all the same (replicas may come).
func TestRunSaysTooFewReplicasAreConnected(t *testing.T) {
	rdb, ns := redistest.New(t)
	var (
		mu      sync.Mutex
		records []slog.Record
	)
	h := recordingHandler{mu: &mu, records: &records, started: make(chan struct{}), once: &sync.Once{}}
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns, Durability: jobs.Durability{Replicas: 2}},
		Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-h.started:
	case err := <-done:
		t.Fatalf("Run returned %v before the pool started", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range records {
		if r.Level != slog.LevelError {
			continue
		}
		got := map[string]int64{}
		r.Attrs(func(a slog.Attr) bool {
			if a.Value.Kind() == slog.KindInt64 {
				got[a.Key] = a.Value.Int64()
			}
			return true
		})
		if c, ok := got["replicas_connected"]; ok && c == 0 && got["replicas_required"] == 2 {
			return
		}
	}
	t.Fatalf("no error-level log naming 0 replicas connected of 2 required among %d records", len(records))
}

// A pool whose Durability asks for more replicas than are connected
// exports the shortfall (fencedq_redis_replicas_missing) and publishes it
// in its heartbeat, for the dashboard's banner, from its start; the check
// made with the eviction policy's (every 12 heartbeats) sees a replica
// that connects later: the gauge drops to 0, the heartbeat no longer
// carries it, and the pool says so.
func TestPoolExportsMissingReplicas(t *testing.T) {
	primary := redistest.Start(t, redistest.Options{})
	rdb := primary.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	cfg := e.config()
	cfg.Jobs.Durability = jobs.Durability{Replicas: 1}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p := e.pool(cfg)
	worker.SetClockEvery(p, 5*time.Millisecond)
	h := worker.InitHooks(p, t)
	e.start(p)
	h.Clocked.WaitOrTimeout() // the first heartbeat comes after it
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_replicas_missing"); v != 1 {
		t.Fatalf("fencedq_redis_replicas_missing = %v with no replica of 1 required, want 1", v)
	}
	ctx := t.Context()
	missing := func() (int, int) {
		t.Helper()
		ps, err := e.client.Inspector().Pools(ctx)
		if err != nil || len(ps) != 1 {
			t.Fatalf("pools: %v, %v", ps, err)
		}
		return ps[0].ReplicasMissing, ps[0].ReplicasRequired
	}
	if m, r := missing(); m != 1 || r != 1 {
		t.Fatalf("heartbeat: %d replicas missing of %d required, want 1 of 1", m, r)
	}

	replica := redistest.Start(t, redistest.Options{})
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := replica.Client().ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(e.logs.String(), "enough Redis replicas are connected again") {
		h.Clocked.WaitOrTimeout()
	}
	if v := metricSum(t, reg, "fencedq_redis_replicas_missing"); v != 0 {
		t.Fatalf("fencedq_redis_replicas_missing = %v with the replica connected, want 0", v)
	}
	h.Clocked.WaitOrTimeout() // a heartbeat after the check
	h.Clocked.WaitOrTimeout()
	if m, _ := missing(); m != 0 {
		t.Fatalf("heartbeat: %d replicas missing with the replica connected, want 0", m)
	}
}
