package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Latency targets for fencedq, enqueue call to handler start.
const (
	latencyP50Target = time.Millisecond
	latencyP99Target = 5 * time.Millisecond
)

// latArgs is the latency job: At is when its Enqueue call was made.
type latArgs struct {
	N  int   `json:"n"`
	At int64 `json:"at"` // unix ns
}

// Kind implements jobs.JobArgs.
func (latArgs) Kind() string { return "bench_latency" }

// latencyRun is one side's run at the offered rate.
type latencyRun struct {
	jobs        int
	offeredRate float64 // jobs/s actually offered
	p50, p99    time.Duration
	p999, max   time.Duration
	mean        time.Duration
	cost        PerUnit
}

// LatencySide is one system's enqueue-to-handler-start latency.
type LatencySide struct {
	// P50Ms, P99Ms, P999Ms, MaxMs and MeanMs are medians over the runs.
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
	// OfferedPerSec is the median rate the enqueuer actually achieved.
	OfferedPerSec float64 `json:"offered_jobs_per_s"`
	// RunsP50Ms, RunsP99Ms and RunsMaxMs list every run's figures.
	RunsP50Ms []float64 `json:"runs_p50_ms"`
	RunsP99Ms []float64 `json:"runs_p99_ms"`
	RunsMaxMs []float64 `json:"runs_max_ms"`
	// PerJob is the cost per job of the median run (by p99): the enqueue,
	// the delivery and whatever the idle side polls meanwhile.
	PerJob PerUnit `json:"per_job"`
}

// LatencyResult is the latency section: jobs offered at a fixed rate into
// an idle asynq server and an idle fencedq pool, one side at a time; from
// the Enqueue call to the handler's start.
type LatencyResult struct {
	Rate        float64     `json:"rate_jobs_per_s"`
	DurationSec float64     `json:"duration_s"`
	Jobs        int         `json:"jobs"`
	Repeat      int         `json:"repeat"`
	Concurrency int         `json:"concurrency"`
	Asynq       LatencySide `json:"asynq"`
	Fencedq     LatencySide `json:"fencedq"`
	// TargetP50Ms and TargetP99Ms are fencedq's targets.
	TargetP50Ms float64 `json:"target_p50_ms"`
	TargetP99Ms float64 `json:"target_p99_ms"`
	MeetsTarget bool    `json:"meets_target"`
}

// latencyRecorder keeps each job's latency and signals when all started.
type latencyRecorder struct {
	lat  []int64 // ns, by job number
	seen atomic.Int64
	done chan struct{}
}

func newLatencyRecorder(n int) *latencyRecorder {
	return &latencyRecorder{lat: make([]int64, n), done: make(chan struct{})}
}

// started records that job a started now. A job that runs twice counts once.
func (l *latencyRecorder) started(a latArgs) {
	d := time.Now().UnixNano() - a.At
	if a.N < 0 || a.N >= len(l.lat) || !atomic.CompareAndSwapInt64(&l.lat[a.N], 0, max(d, 1)) {
		return
	}
	if l.seen.Add(1) == int64(len(l.lat)) {
		close(l.done)
	}
}

func (l *latencyRecorder) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.done:
		return nil
	case <-t.C:
		return fmt.Errorf("only %d of %d jobs started within %v", l.seen.Load(), len(l.lat), timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// percentile returns the q-quantile (nearest rank) of sorted xs.
func percentile(sorted []int64, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return time.Duration(sorted[min(max(i, 0), len(sorted)-1)])
}

// offer calls enqueue(i, now) for n jobs at rate jobs/s, each call on its
// own goroutine so a slow call never delays the next, and returns the rate
// actually offered and the first error.
func offer(ctx context.Context, n int, rate float64, enqueue func(i int, at time.Time) error) (float64, error) {
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := enqueue(i, time.Now()); err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	offered := float64(n) / time.Since(start).Seconds()
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return offered, first
}

// summarizeLatency turns a recorder's figures into a run.
func summarizeLatency(l *latencyRecorder, offered float64, cost PerUnit) latencyRun {
	xs := slices.Clone(l.lat)
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	return latencyRun{jobs: len(xs), offeredRate: offered, cost: cost,
		p50: percentile(xs, 0.50), p99: percentile(xs, 0.99), p999: percentile(xs, 0.999),
		max: time.Duration(xs[len(xs)-1]), mean: time.Duration(sum / float64(len(xs)))}
}

// idleWait is how long a side runs idle before jobs are offered.
const idleWait = 500 * time.Millisecond

type latencyFunc func(ctx context.Context, t *target, n, conc int, rate float64) (latencyRun, error)

func asynqLatency(ctx context.Context, t *target, n, conc int, rate float64) (latencyRun, error) {
	q := uniq("aql")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, q, []string{q})
	rec := newLatencyRecorder(n)
	srv := asynq.NewServerFromRedisClient(t.rdb, asynqConfig(conc, []string{q}))
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		var a latArgs
		if err := json.Unmarshal(task.Payload(), &a); err != nil {
			return err
		}
		rec.started(a)
		return nil
	})); err != nil {
		return latencyRun{}, fmt.Errorf("asynq server: %w", err)
	}
	defer srv.Shutdown()
	time.Sleep(idleWait)
	ac := asynq.NewClientFromRedisClient(t.rdb)
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return latencyRun{}, err
	}
	offered, err := offer(ctx, n, rate, func(i int, at time.Time) error {
		payload, err := json.Marshal(latArgs{N: i, At: at.UnixNano()})
		if err != nil {
			return err
		}
		_, err = ac.EnqueueContext(ctx, asynq.NewTask(latArgs{}.Kind(), payload), asynq.Queue(q), asynq.MaxRetry(jobs.DefaultMaxRetries))
		return err
	})
	if err != nil {
		return latencyRun{}, fmt.Errorf("asynq enqueue: %w", err)
	}
	if err := rec.wait(ctx, drainTimeout(n)); err != nil {
		return latencyRun{}, fmt.Errorf("asynq: %w", err)
	}
	cost, err := p.end(ctx, n)
	return summarizeLatency(rec, offered, cost), err
}

func fencedqLatency(ctx context.Context, t *target, n, conc int, rate float64) (latencyRun, error) {
	ns := uniq("fql")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	rec := newLatencyRecorder(n)
	pool, err := worker.NewPool(t.rdb, poolConfig(ns, conc, nil))
	if err != nil {
		return latencyRun{}, err
	}
	if err := worker.Register(pool, jobs.WorkFunc[latArgs](func(_ context.Context, j *jobs.Job[latArgs]) error {
		rec.started(j.Args)
		return nil
	})); err != nil {
		return latencyRun{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(rctx) }()
	defer func() {
		cancel()
		<-ran
	}()
	time.Sleep(idleWait)
	c := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return latencyRun{}, err
	}
	offered, err := offer(ctx, n, rate, func(i int, at time.Time) error {
		_, err := c.Enqueue(ctx, latArgs{N: i, At: at.UnixNano()})
		return err
	})
	if err != nil {
		return latencyRun{}, fmt.Errorf("fencedq enqueue: %w", err)
	}
	if err := rec.wait(ctx, drainTimeout(n)); err != nil {
		return latencyRun{}, fmt.Errorf("fencedq: %w", err)
	}
	cost, err := p.end(ctx, n)
	return summarizeLatency(rec, offered, cost), err
}

func durMs(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func latencySide(rs []latencyRun) LatencySide {
	var s LatencySide
	var p999, mean, offered []float64
	for _, r := range rs {
		s.RunsP50Ms = append(s.RunsP50Ms, durMs(r.p50))
		s.RunsP99Ms = append(s.RunsP99Ms, durMs(r.p99))
		s.RunsMaxMs = append(s.RunsMaxMs, durMs(r.max))
		p999 = append(p999, durMs(r.p999))
		mean = append(mean, durMs(r.mean))
		offered = append(offered, round(r.offeredRate, 1))
	}
	s.P50Ms, s.P99Ms, s.MaxMs = median(s.RunsP50Ms), median(s.RunsP99Ms), median(s.RunsMaxMs)
	s.P999Ms, s.MeanMs, s.OfferedPerSec = median(p999), median(mean), median(offered)
	s.PerJob = rs[medianIndex(s.RunsP99Ms)].cost
	return s
}

func (e *bench) latency(ctx context.Context) (*LatencyResult, error) {
	o := e.opts
	n := max(int(o.latencyRate*o.latencyDuration.Seconds()), 1)
	r := &LatencyResult{Rate: o.latencyRate, DurationSec: o.latencyDuration.Seconds(), Jobs: n, Repeat: o.repeat,
		Concurrency: o.concurrency, TargetP50Ms: durMs(latencyP50Target), TargetP99Ms: durMs(latencyP99Target)}
	names := []string{"asynq", "fencedq"}
	fns := []latencyFunc{asynqLatency, fencedqLatency}
	warm := max(min(n/10, int(o.latencyRate)), 1) // at most a second of warm-up
	for _, fn := range fns {
		if _, err := fn(ctx, e.single, warm, o.concurrency, o.latencyRate); err != nil {
			return nil, err
		}
	}
	runs := make([][]latencyRun, len(fns))
	for rep := range o.repeat {
		for k := range fns {
			i := k
			if rep%2 == 1 {
				i = len(fns) - 1 - k
			}
			run, err := fns[i](ctx, e.single, n, o.concurrency, o.latencyRate)
			if err != nil {
				return nil, err
			}
			e.progress("  %s run %d: %.0f jobs/s offered, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
				names[i], rep+1, run.offeredRate, durMs(run.p50), durMs(run.p99), durMs(run.max))
			runs[i] = append(runs[i], run)
		}
	}
	r.Asynq, r.Fencedq = latencySide(runs[0]), latencySide(runs[1])
	r.MeetsTarget = r.Fencedq.P50Ms <= r.TargetP50Ms && r.Fencedq.P99Ms <= r.TargetP99Ms
	return r, nil
}
