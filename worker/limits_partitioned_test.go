package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// countingWorker counts the attempts of limited jobs running at once and
// the most seen.
type countingWorker struct{ cur, most atomic.Int64 }

func (w *countingWorker) Work(_ context.Context, j *jobs.Job[limitArgs]) error {
	if j.Args.Key == "" {
		return nil
	}
	n := w.cur.Add(1)
	for m := w.most.Load(); n > m && !w.most.CompareAndSwap(m, n); m = w.most.Load() {
	}
	time.Sleep(20 * time.Millisecond) // a hold, not an assertion
	w.cur.Add(-1)
	return nil
}

// TestLimitHoldsAcrossPartitions: on a queue of 4 partitions, jobs of one
// concurrency limit (max 1) or one rate limit, enqueued without a partition
// key, all go to one partition, so the limit binds across the queue: one
// permit promised, the other jobs parked behind it, and a drain by a pool
// of 8 slots never runs two at once.
func TestLimitHoldsAcrossPartitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, jobs.DefaultQueue, 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	var rs []*jobs.Result
	for range 8 {
		rs = append(rs, e.enqueue(limitArgs{Key: "export:acme", Max: 1}))
	}
	rated := map[string]bool{}
	for range 8 {
		r := e.enqueue(limitArgs{}, jobs.Rate("provider", 1, time.Hour))
		rated[r.Partition] = true
	}
	if len(rated) != 1 {
		t.Errorf("jobs of one rate limit went to %d partitions, want 1", len(rated))
	}
	st, err := e.client.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 1 || st.Limits[0].Promised != 1 || st.Limits[0].Waiting != 7 {
		t.Errorf("limits %+v, want export:acme once: 1 promised, 7 parked", st.Limits)
	}

	cfg := e.config()
	cfg.Concurrency = 8
	p := e.pool(cfg)
	w := &countingWorker{}
	if err := worker.Register(p, jobs.Worker[limitArgs](w)); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	e.waitAll(rs, jobs.Succeeded)
	if n := w.most.Load(); n != 1 {
		t.Errorf("%d attempts of export:acme at once, limit 1", n)
	}
}
