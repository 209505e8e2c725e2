package worker_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// BenchmarkDrain enqueues b.N no-op jobs and drains them with one pool of
// 50 slots on a private Redis. cmd/fencedq-bench compares the same with
// plain asynq; this one is for profiling the pool
// (go test -run ^$ -bench Drain -cpuprofile cpu.out ./worker/).
func BenchmarkDrain(b *testing.B) {
	drain(b, redistest.Start(b, redistest.Options{}).Client(), jobs.Durability{}, 1)
}

// BenchmarkDrainQueues is BenchmarkDrain with the jobs spread over 1 and
// over 100 queues of one pool (the benchmark section queues compares them).
func BenchmarkDrainQueues(b *testing.B) {
	rdb := redistest.Start(b, redistest.Options{}).Client()
	b.Run("1", func(b *testing.B) { drain(b, rdb, jobs.Durability{}, 1) })
	b.Run("100", func(b *testing.B) { drain(b, rdb, jobs.Durability{}, 100) })
}

// BenchmarkDrainReplicated is BenchmarkDrain on a primary with a replica
// (and Sentinel): default, and durable (each write waits for the replica).
func BenchmarkDrainReplicated(b *testing.B) {
	f := redistest.StartFailover(b, redistest.FailoverOptions{})
	b.Run("default", func(b *testing.B) { drain(b, f.Client(), jobs.Durability{}, 1) })
	b.Run("durable", func(b *testing.B) { drain(b, f.Client(), jobs.Durability{Replicas: 1}, 1) })
}

func drain(b *testing.B, rdb redis.UniversalClient, d jobs.Durability, queues int) {
	ns := redistest.Namespace(b)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Durability: d})
	ctx := context.Background()
	batch := make([]jobs.Params, 0, 500)
	for i := 0; i < b.N; i++ {
		batch = append(batch, jobs.Params{Args: echoArgs{N: i}, Options: []jobs.Option{jobs.Queue(queueName(i % queues))}})
		if len(batch) == cap(batch) || i == b.N-1 {
			if _, err := client.EnqueueMany(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	qs := map[string]int{}
	for i := range queues {
		qs[queueName(i)] = 1
	}
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns, Durability: d}, Concurrency: 50, Queues: qs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	all := make(chan struct{})
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	finished := make(chan struct{})
	b.ResetTimer()
	go func() { _ = p.Run(runCtx); close(finished) }()
	<-all
	b.StopTimer()
	stop()
	<-finished
}

func queueName(i int) string { return "q" + strconv.Itoa(i) }

// BenchmarkStartOverManyQueues measures how long a pool over 1 000 and
// 5 000 idle queues takes from Run to the end of a job enqueued into its
// last queue just after it started (the first look arms every queue's
// wake-ups: see ARCHITECTURE.md, queue selection).
func BenchmarkStartOverManyQueues(b *testing.B) {
	rdb := redistest.Start(b, redistest.Options{}).Client()
	for _, n := range []int{1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			qs := map[string]int{}
			for i := range n {
				qs[queueName(i)] = 1
			}
			for range b.N {
				ns := redistest.Namespace(b)
				client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
				p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Queues: qs,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				ran := make(chan struct{})
				_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error {
					close(ran)
					return nil
				}))
				ctx, stop := context.WithCancel(context.Background())
				finished := make(chan struct{})
				go func() { _ = p.Run(ctx); close(finished) }()
				if _, err := client.Enqueue(ctx, echoArgs{}, jobs.Queue(queueName(n-1))); err != nil {
					b.Fatal(err)
				}
				<-ran
				b.StopTimer()
				stop()
				<-finished
				b.StartTimer()
			}
		})
	}
}
