package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// TestStartStopLeavesNothing starts and stops a pool, a client, an
// inspector, the dashboard handler and a lease manager with a kept-alive
// lease 50 times over one Redis client: the goroutines return to their
// count before, no connection of the client is left subscribed (a pool's
// subscription is closed when it stops), and the client's connections on
// the server stay within what go-redis keeps (its pool size plus a few it
// opens beyond it under load), not one or more per cycle; no stopped pool
// stays listed as live.
func TestStartStopLeavesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	const poolSize = 8
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: poolSize, ClientName: "under-test"})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close(); _ = admin.Close() })
	ctx := context.Background()
	e := newEnvOn(t, rdb, "leak")
	// connections counts the client's connections on the server and those
	// of them still subscribed.
	connections := func() (n, subscribed int) {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " name=under-test ") {
				n++
				if !strings.Contains(line, " sub=0 psub=0 ssub=0 ") {
					subscribed++
				}
			}
		}
		return n, subscribed
	}

	cycle := func() {
		c := jobs.NewClient(rdb, jobs.Config{Namespace: e.ns})
		cfg := e.config()
		cfg.Registerer = nil
		p := e.pool(cfg)
		done := make(chan struct{}, 1)
		if err := worker.Register(p, jobs.WorkFunc[goodArgs](func(context.Context, *jobs.Job[goodArgs]) error {
			done <- struct{}{}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- p.Run(runCtx) }()
		if _, err := c.Enqueue(ctx, goodArgs{}); err != nil {
			t.Fatal(err)
		}
		<-done
		h, err := dashboard.New(c.Inspector(), c, dashboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/overview", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("dashboard: %d %s", rec.Code, rec.Body)
		}
		m := lease.NewManager(rdb, lease.Config{Namespace: e.ns})
		l, err := m.Acquire(ctx, "res", "me", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.KeepAlive(ctx, l, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}

	cycle() // warm up: lazily made connections and goroutines of the Redis client
	base := runtime.NumGoroutine()
	for range 50 {
		cycle()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := runtime.NumGoroutine()
		n, subscribed := connections()
		if g <= base && n <= 2*poolSize && subscribed == 0 {
			break
		}
		if time.Now().After(deadline) {
			list, _ := admin.ClientList(ctx).Result()
			t.Fatalf("after 50 cycles: %d goroutines (%d before), %d connections (%d subscribed, pool size %d)\n%s",
				g, base, n, subscribed, poolSize, list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each pool left the live pools' index and took its heartbeat with it.
	if n, err := rdb.ZCard(ctx, e.ns+":pools").Result(); err != nil || n != 0 {
		t.Errorf("%d stopped pools still listed as live (%v)", n, err)
	}
	if keys, err := rdb.Keys(ctx, e.ns+":pool:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("heartbeats of stopped pools left: %v (%v)", keys, err)
	}
}
