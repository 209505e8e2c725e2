package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type idleArgs struct{}

func (idleArgs) Kind() string { return "idle" }

// BenchmarkIdleManyQueues measures the Redis CPU an idle pool over 1 000
// queues costs (used_cpu_sys + used_cpu_user over 10 s, on a private
// server), reported as redis-ms/s; FENCEDQ_IDLE_COMMANDS set logs the
// commands sent meanwhile. One sample whatever b.N: run it with
// -benchtime 1x.
func BenchmarkIdleManyQueues(b *testing.B) {
	const n = 1000
	for range b.N {
		b.ReportMetric(idleCost(b, n), "redis-ms/s")
	}
}

// idleCost returns the Redis CPU, in ms per second, that an idle pool
// over n queues costs.
func idleCost(t testing.TB, n int) float64 {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	ctx := context.Background()
	qs := map[string]int{}
	for i := range n {
		qs[fmt.Sprintf("q%04d", i)] = 1
	}
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Queues: qs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(p, jobs.WorkFunc[idleArgs](func(context.Context, *jobs.Job[idleArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	redistest.AwaitWithin(t, rdb, ns, "a leader's status", time.Minute, func() bool {
		st, err := l.LeaderStatus(ctx)
		return err == nil && st != nil && st.Leader != ""
	})
	time.Sleep(5 * time.Second) // the first passes (history, tokens) done
	rdb.ConfigResetStat(ctx)
	before := usedCPU(t, rdb)
	time.Sleep(10 * time.Second)
	after := usedCPU(t, rdb)
	if os.Getenv("FENCEDQ_IDLE_COMMANDS") != "" {
		stats, _ := rdb.Info(ctx, "commandstats").Result()
		t.Logf("commands over 10 s:\n%s", stats)
	}
	return (after - before) * 1000 / 10
}

func usedCPU(t testing.TB, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}
