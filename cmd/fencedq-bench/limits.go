package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// limitsTarget is the largest slowdown aimed for by a limit or a rate
// that never binds, at concurrency 50: 10 %.
const limitsTarget = 10.0

// LimitsResult is the limits section: the cost of flow control on the
// no-op drain, and a hot key's backlog beside other keys.
type LimitsResult struct {
	Jobs        int     `json:"jobs"`
	Repeat      int     `json:"repeat"`
	Concurrency int     `json:"concurrency"`
	Plain       Variant `json:"plain"`
	// Limit: every job under one concurrency limit of 1 000 000 (never binds).
	Limit Variant `json:"limit"`
	// Rate: every job under one rate of 1 000 000 per second (never binds).
	Rate           Variant `json:"rate"`
	LimitSlowerPct float64 `json:"limit_slower_pct"`
	RateSlowerPct  float64 `json:"rate_slower_pct"`
	Target         float64 `json:"target_pct"`
	// Hot key: HotJobs jobs share one key limited to 1, enqueued before
	// OtherJobs jobs on keys of their own (limit 1 each); how fast the
	// others drain, against OtherJobs unlimited jobs alone.
	HotJobs       int     `json:"hot_jobs"`
	OtherJobs     int     `json:"other_jobs"`
	OthersAlone   float64 `json:"others_alone_jobs_per_s"`
	OthersBesides float64 `json:"others_beside_hot_jobs_per_s"`
	OthersPct     float64 `json:"others_pct_of_alone"`
	// OthersAlonePerJob and OthersBesidePerJob are the costs of the runs
	// (from the pool's start to the last other's completion, hot jobs run
	// meanwhile included) per other job, from the median runs: the
	// load-robust figures on a shared machine.
	OthersAlonePerJob  PerUnit `json:"others_alone_per_job"`
	OthersBesidePerJob PerUnit `json:"others_beside_per_job"`
}

// limits runs the limits section on the single server.
func (e *bench) limits(ctx context.Context) (*LimitsResult, error) {
	o := e.opts
	conc := o.concurrency
	r := &LimitsResult{Jobs: o.jobs, Repeat: o.repeat, Concurrency: conc, Target: limitsTarget}
	with := func(opt func(i int) []jobs.Option) drainFunc {
		return func(ctx context.Context, t *target, queues []string, n, conc int, _ *drainOpts) (drainRun, error) {
			return fencedqDrain(ctx, t, queues, n, conc, &drainOpts{fencedqOptions: opt})
		}
	}
	limit := with(func(int) []jobs.Option { return []jobs.Option{jobs.Limit("bench", jobs.MaxFlowMax)} })
	rate := with(func(int) []jobs.Option { return []jobs.Option{jobs.Rate("bench", jobs.MaxFlowMax, time.Second)} })
	runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.jobs, conc, nil,
		[]string{"plain", "limit", "rate"}, fencedqDrain, limit, rate)
	if err != nil {
		return nil, err
	}
	r.Plain, r.Limit, r.Rate = variantOf(runs[0]), variantOf(runs[1]), variantOf(runs[2])
	r.LimitSlowerPct = slowerPct(r.Limit.JobsPerSec, r.Plain.JobsPerSec)
	r.RateSlowerPct = slowerPct(r.Rate.JobsPerSec, r.Plain.JobsPerSec)
	e.progress("  limit %s, rate %s", slowerText(r.LimitSlowerPct), slowerText(r.RateSlowerPct))

	r.HotJobs, r.OtherJobs = o.jobs*10, max(o.jobs/10, 100)
	var alone, beside []float64
	var alonePer, besidePer []PerUnit
	for range o.repeat {
		a, ap, err := othersDrain(ctx, e.single, 0, r.OtherJobs, conc)
		if err != nil {
			return nil, err
		}
		b, bp, err := othersDrain(ctx, e.single, r.HotJobs, r.OtherJobs, conc)
		if err != nil {
			return nil, err
		}
		alone, beside = append(alone, a), append(beside, b)
		alonePer, besidePer = append(alonePer, ap), append(besidePer, bp)
		e.progress("  others alone %.0f jobs/s (%s), beside %d hot jobs %.0f jobs/s (%s)",
			a, othersCost(ap), r.HotJobs, b, othersCost(bp))
	}
	r.OthersAlone, r.OthersBesides = round(median(alone), 0), round(median(beside), 0)
	r.OthersAlonePerJob, r.OthersBesidePerJob = alonePer[medianIndex(alone)], besidePer[medianIndex(beside)]
	r.OthersPct = round(100*ratio(r.OthersBesides, r.OthersAlone), 1)
	return r, nil
}

// othersCost is a hot-key run's cost per other job, in brief.
func othersCost(p PerUnit) string {
	return fmt.Sprintf("Redis CPU %.1f µs, %.2f claims, %.2f Redis commands per other job",
		p.RedisCPUMicros, p.Scripts["jobs:claim"], p.ServerCommands)
}

// othersDrain enqueues hot jobs on one key limited to 1 (none when hot is
// 0), then others jobs on keys of their own (limited to 1 each; unlimited
// when hot is 0), runs a pool and returns how fast the others completed
// (jobs/s from the pool's start to the last other's completion) and the
// run's cost per other job.
func othersDrain(ctx context.Context, t *target, hot, others, conc int) (float64, PerUnit, error) {
	ns := uniq("fql")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	client := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	defer func() { _ = client.Close() }()
	const chunk = 500
	var batch []jobs.Params
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := client.EnqueueMany(ctx, batch)
		batch = batch[:0]
		return err
	}
	for i := range hot + others {
		var opts []jobs.Option
		switch {
		case i < hot:
			opts = []jobs.Option{jobs.Limit("hot", 1)}
		case hot > 0:
			opts = []jobs.Option{jobs.Limit(fmt.Sprintf("other:%d", i), 1)}
		}
		batch = append(batch, jobs.Params{Args: noopArgs{N: i}, Options: opts})
		if len(batch) == chunk {
			if err := flush(); err != nil {
				return 0, PerUnit{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, PerUnit{}, err
	}
	pool, err := worker.NewPool(t.rdb, poolConfig(ns, conc, map[string]int{jobs.DefaultQueue: 1}))
	if err != nil {
		return 0, PerUnit{}, err
	}
	var left atomic.Int64
	left.Store(int64(others))
	done := make(chan struct{})
	if err := worker.Register(pool, jobs.WorkFunc[noopArgs](func(_ context.Context, j *jobs.Job[noopArgs]) error {
		if j.Args.N >= hot && left.Add(-1) == 0 {
			close(done)
		}
		return nil
	})); err != nil {
		return 0, PerUnit{}, err
	}
	p, err := startProbe(ctx, t.rdb, t.hook)
	if err != nil {
		return 0, PerUnit{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	t0 := time.Now()
	go func() { ran <- pool.Run(rctx) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
	}
	elapsed := time.Since(t0)
	cost, perr := p.end(ctx, others)
	cancel()
	if err := <-ran; err != nil {
		return 0, PerUnit{}, err
	}
	if perr != nil {
		return 0, PerUnit{}, perr
	}
	if left.Load() > 0 {
		return 0, PerUnit{}, fmt.Errorf("%d of %d other jobs not done", left.Load(), others)
	}
	return float64(others) / elapsed.Seconds(), cost, nil
}

// printLimits writes the limits section's table.
func printLimits(w io.Writer, r *LimitsResult) {
	fmt.Fprintf(w, "\nlimits: %d no-op jobs drained, concurrency %d, median of %d\n", r.Jobs, r.Concurrency, r.Repeat)
	fmt.Fprintf(w, "  plain %.0f jobs/s; one limit that never binds %.0f jobs/s (%s); one rate that never binds %.0f jobs/s (%s); target ≤ %.0f%%: %s\n",
		r.Plain.JobsPerSec, r.Limit.JobsPerSec, slowerText(r.LimitSlowerPct), r.Rate.JobsPerSec, slowerText(r.RateSlowerPct), r.Target,
		verdict(r.LimitSlowerPct <= r.Target && r.RateSlowerPct <= r.Target))
	fmt.Fprintf(w, "  hot key: %d jobs on one key limited to 1 ahead of %d jobs on keys of their own: the others drain at %.0f jobs/s, %.1f%% of %.0f jobs/s alone (target ≥ 80%%: %s)\n",
		r.HotJobs, r.OtherJobs, r.OthersBesides, r.OthersPct, r.OthersAlone, verdict(r.OthersPct >= 80))
	fmt.Fprintf(w, "    per other job, alone: %s\n    per other job, beside the hot key: %s\n",
		othersCost(r.OthersAlonePerJob), othersCost(r.OthersBesidePerJob))
}
