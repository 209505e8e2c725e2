package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestSaturatedPoolNeverExceedsConcurrency drains a backlog with handlers of
// uneven length, so slots free while claims are in flight and a second claim
// goes out beside the first: the pool never runs more handlers than its
// concurrency, and every job runs once.
func TestSaturatedPoolNeverExceedsConcurrency(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n, concurrency = 1500, 8
	ps := make([]jobs.Params, n)
	for i := range ps {
		ps[i] = jobs.Params{Args: plainArgs{N: i}}
	}
	if _, err := e.client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Concurrency = concurrency
	p := e.pool(cfg)
	var running, peak, runs atomic.Int64
	_ = worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		r := running.Add(1)
		defer running.Add(-1)
		for {
			m := peak.Load()
			if r <= m || peak.CompareAndSwap(m, r) {
				break
			}
		}
		runs.Add(1)
		if j.Args.N%3 == 0 {
			time.Sleep(time.Millisecond) // uneven: slots free a few at a time
		}
		return nil
	}))
	e.start(p)
	waitCount(t, e, jobs.Succeeded, n)
	if peak.Load() > concurrency {
		t.Fatalf("%d handlers ran at once: concurrency is %d", peak.Load(), concurrency)
	}
	if runs.Load() != n {
		t.Fatalf("%d handler runs for %d jobs", runs.Load(), n)
	}
}
