package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
)

// Enqueue ratio targets: single Enqueue against asynq's Enqueue, and
// EnqueueMany against asynq's Enqueue.
const (
	enqueueTarget     = 1.5
	enqueueManyTarget = 5.0
)

// EnqueueSide is one way of enqueueing, timed.
type EnqueueSide struct {
	// JobsPerSec is the median enqueue throughput.
	JobsPerSec float64 `json:"jobs_per_s"`
	// Runs lists every repetition's throughput.
	Runs []float64 `json:"runs_jobs_per_s"`
	// PerJob is the cost per enqueued job, from the median run.
	PerJob PerUnit `json:"per_job"`
}

// EnqueueResult is the enqueue section: Goroutines goroutines enqueue Jobs
// no-op jobs into an empty queue that nothing drains.
type EnqueueResult struct {
	Jobs       int `json:"jobs"`
	Repeat     int `json:"repeat"`
	Goroutines int `json:"goroutines"`
	// Batch is how many jobs one EnqueueMany call carries.
	Batch int `json:"batch"`
	// Asynq is asynq's Client.EnqueueContext, one call per job.
	Asynq EnqueueSide `json:"asynq"`
	// Fencedq is jobs.Client.Enqueue, one call per job.
	Fencedq EnqueueSide `json:"fencedq"`
	// FencedqMany is jobs.Client.EnqueueMany, Batch jobs per call.
	FencedqMany EnqueueSide `json:"fencedq_many"`
	// Ratio is Fencedq ÷ Asynq jobs/s (target ≥ Target).
	Ratio       float64 `json:"ratio"`
	Target      float64 `json:"target"`
	MeetsTarget bool    `json:"meets_target"`
	// RatioMany is FencedqMany ÷ Asynq jobs/s (target ≥ TargetMany).
	RatioMany       float64 `json:"ratio_many"`
	TargetMany      float64 `json:"target_many"`
	MeetsTargetMany bool    `json:"meets_target_many"`
}

// enqueueRun is one timed enqueue of n jobs.
type enqueueRun struct {
	jobsPerSec float64
	cost       PerUnit
}

// enqueueFunc enqueues n jobs from g goroutines (in calls of batch jobs
// where the side batches) into a fresh queue, timed.
type enqueueFunc func(ctx context.Context, t *target, n, g, batch int) (enqueueRun, error)

// timedParallel runs fn(i) for i in [0, calls) from g goroutines between
// two probe readings, and divides by n jobs.
func timedParallel(ctx context.Context, t *target, n, calls, g int, fn func(i int) error) (enqueueRun, error) {
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return enqueueRun{}, err
	}
	start := time.Now()
	if err := parallel(ctx, calls, g, fn); err != nil {
		return enqueueRun{}, err
	}
	r := enqueueRun{jobsPerSec: float64(n) / time.Since(start).Seconds()}
	r.cost, err = p.end(ctx, n)
	return r, err
}

func asynqEnqueue(ctx context.Context, t *target, n, g, _ int) (enqueueRun, error) {
	q := uniq("aqe")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, q, []string{q})
	ac := asynq.NewClientFromRedisClient(t.rdb)
	return timedParallel(ctx, t, n, n, g, func(i int) error {
		payload, err := json.Marshal(noopArgs{N: i})
		if err != nil {
			return err
		}
		_, err = ac.EnqueueContext(ctx, asynq.NewTask(noopArgs{}.Kind(), payload), asynq.Queue(q), asynq.MaxRetry(jobs.DefaultMaxRetries))
		return err
	})
}

func fencedqEnqueue(ctx context.Context, t *target, n, g, _ int) (enqueueRun, error) {
	ns := uniq("fqe")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	c := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	return timedParallel(ctx, t, n, n, g, func(i int) error {
		_, err := c.Enqueue(ctx, noopArgs{N: i})
		return err
	})
}

func fencedqEnqueueMany(ctx context.Context, t *target, n, g, batch int) (enqueueRun, error) {
	ns := uniq("fqm")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	c := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	calls := (n + batch - 1) / batch
	return timedParallel(ctx, t, n, calls, g, func(k int) error {
		from, to := k*batch, min((k+1)*batch, n)
		ps := make([]jobs.Params, 0, to-from)
		for i := from; i < to; i++ {
			ps = append(ps, jobs.Params{Args: noopArgs{N: i}})
		}
		_, err := c.EnqueueMany(ctx, ps)
		return err
	})
}

// enqueueSides times each of fns (named names) enqueueing into the single
// server in calls of batch jobs: a warm-up run each (scripts cached,
// connections open), then o.repeat rounds of one run each, every other
// round in reverse order; each side's figures are its median run's.
func (e *bench) enqueueSides(ctx context.Context, names []string, fns []enqueueFunc, batch int) ([]EnqueueSide, error) {
	o := e.opts
	for _, fn := range fns {
		if _, err := fn(ctx, e.single, max(o.enqueueJobs/10, 20), o.enqueueGoroutines, batch); err != nil {
			return nil, err
		}
	}
	runs := make([][]enqueueRun, len(fns))
	for rep := range o.repeat {
		for k := range fns {
			i := k
			if rep%2 == 1 {
				i = len(fns) - 1 - k
			}
			run, err := fns[i](ctx, e.single, o.enqueueJobs, o.enqueueGoroutines, batch)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			e.progress("  %s run %d: %.0f jobs/s", names[i], rep+1, run.jobsPerSec)
			runs[i] = append(runs[i], run)
		}
	}
	sides := make([]EnqueueSide, len(fns))
	for s, rs := range runs {
		tp := make([]float64, len(rs))
		for i, x := range rs {
			tp[i] = round(x.jobsPerSec, 1)
		}
		sides[s] = EnqueueSide{JobsPerSec: round(median(tp), 1), Runs: tp, PerJob: rs[medianIndex(tp)].cost}
	}
	return sides, nil
}

func (e *bench) enqueue(ctx context.Context) (*EnqueueResult, error) {
	o := e.opts
	r := &EnqueueResult{Jobs: o.enqueueJobs, Repeat: o.repeat, Goroutines: o.enqueueGoroutines, Batch: o.enqueueBatch,
		Target: enqueueTarget, TargetMany: enqueueManyTarget}
	sides, err := e.enqueueSides(ctx, []string{"asynq", "fencedq", "fencedq_many"},
		[]enqueueFunc{asynqEnqueue, fencedqEnqueue, fencedqEnqueueMany}, o.enqueueBatch)
	if err != nil {
		return nil, err
	}
	r.Asynq, r.Fencedq, r.FencedqMany = sides[0], sides[1], sides[2]
	r.Ratio = ratio(r.Fencedq.JobsPerSec, r.Asynq.JobsPerSec)
	r.RatioMany = ratio(r.FencedqMany.JobsPerSec, r.Asynq.JobsPerSec)
	r.MeetsTarget = r.Ratio >= r.Target
	r.MeetsTargetMany = r.RatioMany >= r.TargetMany
	return r, nil
}
