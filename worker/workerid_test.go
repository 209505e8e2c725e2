package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// waitPool waits until the list of pools shows (listed) or no longer
// shows (!listed) a pool of id.
func waitPool(t *testing.T, e *env, id string, listed bool) {
	t.Helper()
	err := redistest.Wait(e.rdb, e.ns+":pool", testsignal.DefaultTimeout, func() bool {
		ps, err := e.client.Inspector().Pools(context.Background())
		return err == nil && slices.ContainsFunc(ps, func(p jobs.PoolInfo) bool { return p.ID == id }) == listed
	})
	if err != nil {
		t.Fatalf("pool %q listed %v: %v", id, listed, err)
	}
}

// A second pool started with the WorkerID of a live pool fails to start
// with an error matching ErrDuplicateWorkerID, logs it at error level with
// both hosts and counts it; the live pool's heartbeat is left as it was.
func TestDuplicateWorkerIDRefusedAtStart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "shared-id"
	first := e.pool(cfg)
	e.start(first)
	waitPool(t, e, "shared-id", true)

	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	second := e.pool(cfg)
	err := second.Run(context.Background())
	if !errors.Is(err, worker.ErrDuplicateWorkerID) {
		t.Fatalf("second pool's Run = %v, want ErrDuplicateWorkerID", err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"other_host"`) {
		t.Errorf("no error line naming the other pool's host: %s", logs.String())
	}
	if v := metricSum(t, reg, "fencedq_worker_id_conflicts_total"); v != 1 {
		t.Errorf("fencedq_worker_id_conflicts_total = %v, want 1", v)
	}
	ps, err := e.client.Inspector().Pools(context.Background())
	if err != nil || len(ps) != 1 || ps[0].Instance == "" {
		t.Fatalf("pools: %+v, %v", ps, err)
	}
}

// A pool started with the WorkerID of a pool that stopped (it left the
// list) starts.
func TestWorkerIDReusedAfterLeave(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "reused-id"
	stop := e.start(e.pool(cfg))
	waitPool(t, e, "reused-id", true)
	stop()
	waitPool(t, e, "reused-id", false)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.pool(cfg).Run(ctx) }()
	waitPool(t, e, "reused-id", true)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("restarted pool's Run = %v", err)
	}
}

// A pool that crashed leaves its heartbeat until it lapses: a pool started
// with its WorkerID meanwhile (a restart after the crash) waits for it to
// lapse, saying so, and then starts, instead of failing; a heartbeat that
// nobody refreshes but that outlives heartbeatTTL (written with a longer
// TTL) is taken over once that much time passed.
func TestWorkerIDReusedAfterCrashOnceLapsed(t *testing.T) {
	for name, ttl := range map[string]time.Duration{"lapses": 2 * time.Second, "outlives": time.Hour} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{})
			e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
			crashed := jobs.PoolInfo{ID: "crashed-id", Instance: "gone", Host: "old-host", PID: 1}
			if err := e.ledger.Heartbeat(context.Background(), crashed, ttl); err != nil {
				t.Fatal(err)
			}
			cfg := e.config()
			cfg.WorkerID = "crashed-id"
			logs := &syncbuf.Buffer{}
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.pool(cfg).Run(ctx) }()
			// Started: the heartbeat listed is the new pool's.
			err := redistest.Wait(e.rdb, e.ns+":pool", 2*testsignal.DefaultTimeout+15*time.Second, func() bool {
				ps, err := e.client.Inspector().Pools(context.Background())
				return err == nil && len(ps) == 1 && ps[0].Instance != "gone"
			})
			if err != nil {
				t.Fatalf("the restarted pool never took over the crashed one's WorkerID: %v\n%s", err, logs.String())
			}
			if !strings.Contains(logs.String(), "waiting for it to lapse") {
				t.Errorf("no line saying the pool waits for the old heartbeat: %s", logs.String())
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run after the crashed pool's heartbeat lapsed = %v", err)
			}
		})
	}
}

// A running pool whose heartbeat replaces a live one of its WorkerID from
// another pool (two pools started at once, or one of an older version)
// logs it at error level with both hosts and counts it.
func TestDuplicateWorkerIDFoundAtHeartbeat(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "beaten-id"
	p := e.pool(cfg)
	h := worker.InitHooks(p, t)
	worker.SetClockEvery(p, 20*time.Millisecond)
	e.start(p)
	waitPool(t, e, "beaten-id", true)
	intruder := jobs.PoolInfo{ID: "beaten-id", Instance: "intruder", Host: "intruder-host", PID: 2}
	if err := e.ledger.Heartbeat(context.Background(), intruder, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Each measurement is followed by a heartbeat: the second measurement
	// signalled after the write follows a whole heartbeat sent after it.
	h.Clocked.Drain()
	h.Clocked.WaitOrTimeout()
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, e.reg, "fencedq_worker_id_conflicts_total"); v < 1 {
		t.Errorf("fencedq_worker_id_conflicts_total = %v, want the intruder counted", v)
	}
	if !strings.Contains(e.logs.String(), `"other_host":"intruder-host"`) {
		t.Errorf("no error line naming the intruder's host")
	}
}
