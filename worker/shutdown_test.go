package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestStoppingMidDrainStrandsNothing stops pools while they drain, many
// times: once a pool's Run returns, none of the jobs it claimed is left
// running (handlers that started finished; jobs claimed but not started went
// back to pending with their attempt not consumed), and every job still
// ends succeeded exactly once.
func TestStoppingMidDrainStrandsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n, stops, every = 2000, 8, 150
	ps := make([]jobs.Params, n)
	for i := range ps {
		ps[i] = jobs.Params{Args: plainArgs{N: i}}
	}
	if _, err := e.client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	for stop := range stops + 1 {
		cfg := e.config()
		cfg.Concurrency = 16
		p := e.pool(cfg)
		reached := make(chan struct{})
		var once atomic.Bool
		start := runs.Load()
		_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
			if runs.Add(1)-start >= every && once.CompareAndSwap(false, true) {
				close(reached)
			}
			return nil
		}))
		halt := e.start(p)
		if stop == stops { // the last pool drains the rest
			waitCount(t, e, jobs.Succeeded, n)
			halt()
			break
		}
		<-reached
		halt()
		counts, err := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
		if err != nil {
			t.Fatal(err)
		}
		if counts[jobs.Running] != 0 {
			t.Fatalf("stop %d: %d jobs left running by a stopped pool (counts %v)", stop, counts[jobs.Running], counts)
		}
	}
	counts, _ := e.client.Inspector().Counts(ctx, jobs.DefaultQueue)
	if counts[jobs.Succeeded] != n || runs.Load() != n {
		t.Fatalf("counts %v, handler runs %d: want %d succeeded, each run once", counts, runs.Load(), n)
	}
	st, _ := e.client.Inspector().Stats(ctx, jobs.DefaultQueue)
	if st["attempted"] != st["succeeded"]+st["deferred"] {
		t.Fatalf("stats %v: every attempt either succeeded or was put back unstarted", st)
	}
}

// waitCount waits until n jobs of the default queue are in state s.
func waitCount(t *testing.T, e *env, s jobs.State, n int64) {
	t.Helper()
	key := e.ns + ":{" + jobs.DefaultQueue + "}:" + string(s)
	redistest.Await(t, e.rdb, key, fmt.Sprintf("%d jobs %s", n, s), func() bool {
		c, err := e.client.Inspector().Counts(context.Background(), jobs.DefaultQueue)
		return err == nil && c[s] == n
	})
}
