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

// groupsTarget is the largest slowdown aimed for by fair groups on the
// no-op drain, at concurrency 50: 10 %.
const groupsTarget = 10.0

// GroupsResult is the groups section: the cost of fair groups (jobs.Group)
// on the no-op drain.
type GroupsResult struct {
	Jobs        int     `json:"jobs"`
	Repeat      int     `json:"repeat"`
	Concurrency int     `json:"concurrency"`
	Plain       Variant `json:"plain"`
	// One: every job in one group.
	One Variant `json:"one_group"`
	// Thousand: job i in group i mod 1000.
	Thousand Variant `json:"thousand_groups"`
	// Slower: throughput lost against plain; CPUMore: Redis CPU per job
	// added (the load-robust figure on a shared machine), both in %.
	OneSlowerPct       float64 `json:"one_slower_pct"`
	ThousandSlowerPct  float64 `json:"thousand_slower_pct"`
	OneCPUMorePct      float64 `json:"one_redis_cpu_more_pct"`
	ThousandCPUMorePct float64 `json:"thousand_redis_cpu_more_pct"`
	Target             float64 `json:"target_pct"`
	// Fairness: group B's few jobs behind group A's backlog.
	Fairness *FairnessResult `json:"fairness"`
}

// groups runs the groups section on the single server.
func (e *bench) groups(ctx context.Context) (*GroupsResult, error) {
	o := e.opts
	conc := o.concurrency
	r := &GroupsResult{Jobs: o.jobs, Repeat: o.repeat, Concurrency: conc, Target: groupsTarget}
	with := func(opt func(i int) []jobs.Option) drainFunc {
		return func(ctx context.Context, t *target, queues []string, n, conc int, _ *drainOpts) (drainRun, error) {
			return fencedqDrain(ctx, t, queues, n, conc, &drainOpts{fencedqOptions: opt})
		}
	}
	one := with(func(int) []jobs.Option { return []jobs.Option{jobs.Group("bench")} })
	thousand := with(func(i int) []jobs.Option { return []jobs.Option{jobs.Group(fmt.Sprintf("g%d", i%1000))} })
	runs, err := compareNamed(ctx, e, e.single, []string{"default"}, o.jobs, conc, nil,
		[]string{"plain", "one group", "1000 groups"}, fencedqDrain, one, thousand)
	if err != nil {
		return nil, err
	}
	r.Plain, r.One, r.Thousand = variantOf(runs[0]), variantOf(runs[1]), variantOf(runs[2])
	r.OneSlowerPct = slowerPct(r.One.JobsPerSec, r.Plain.JobsPerSec)
	r.ThousandSlowerPct = slowerPct(r.Thousand.JobsPerSec, r.Plain.JobsPerSec)
	more := func(v Variant) float64 {
		return round(100*(ratio(v.PerJob.RedisCPUMicros, r.Plain.PerJob.RedisCPUMicros)-1), 1)
	}
	r.OneCPUMorePct, r.ThousandCPUMorePct = more(r.One), more(r.Thousand)
	e.progress("  one group %s, 1000 groups %s", slowerText(r.OneSlowerPct), slowerText(r.ThousandSlowerPct))
	if r.Fairness, err = groupsFairness(ctx, e.single, o.groupsBacklog, 10, conc); err != nil {
		return nil, err
	}
	return r, nil
}

// printGroups writes the groups section's table.
func printGroups(w io.Writer, r *GroupsResult) {
	fmt.Fprintf(w, "\ngroups: %d no-op jobs drained, concurrency %d, median of %d\n", r.Jobs, r.Concurrency, r.Repeat)
	// Besides Redis's CPU: the commands it ran and its time in scripts
	// (commandstats), per job.
	row := func(name string, v Variant, vs string) {
		fmt.Fprintf(w, "  %-12s %8.0f jobs/s  Redis CPU %5.1f µs/job  script time %5.1f µs/job  Redis commands %.2f/job%s\n", name,
			v.JobsPerSec, v.PerJob.RedisCPUMicros, scriptMicros(v.PerJob.ServerMicrosByCommand), v.PerJob.ServerCommands, vs)
	}
	row("ungrouped", r.Plain, "")
	row("one group", r.One, fmt.Sprintf("  (%s, Redis CPU %+.1f%%)", slowerText(r.OneSlowerPct), r.OneCPUMorePct))
	row("1000 groups", r.Thousand, fmt.Sprintf("  (%s, Redis CPU %+.1f%%)", slowerText(r.ThousandSlowerPct), r.ThousandCPUMorePct))
	fmt.Fprintf(w, "  target ≤ %.0f%% Redis CPU per job: %s\n", r.Target,
		verdict(r.OneCPUMorePct <= r.Target && r.ThousandCPUMorePct <= r.Target))
	if f := r.Fairness; f != nil {
		fmt.Fprintf(w, "  fairness: group B's %d jobs behind group A's %d pending, concurrency %d: %d of A's started before B's last, %.1f ms after the pool's start\n",
			f.Few, f.Backlog, f.Concurrency, f.AStartedBeforeLastB, f.LastBMillis)
	}
}

// FairnessResult is the groups section's fairness measurement: group A has
// a backlog of Backlog pending jobs when group B's Few jobs are enqueued
// behind it; the pool then drains from the start.
type FairnessResult struct {
	Backlog     int `json:"backlog"`
	Few         int `json:"few"`
	Concurrency int `json:"concurrency"`
	// AStartedBeforeLastB is how many of A's jobs started before B's last
	// (without groups, all of the backlog would).
	AStartedBeforeLastB int64 `json:"a_started_before_last_b"`
	// LastBMillis is B's last start after the pool's start.
	LastBMillis float64 `json:"last_b_ms"`
}

// groupsFairness enqueues backlog jobs of group "a", then few of group "b",
// runs a pool and measures how many of A's started before B's last.
func groupsFairness(ctx context.Context, t *target, backlog, few, conc int) (*FairnessResult, error) {
	ns := uniq("fqg")
	defer deleteMatching(context.WithoutCancel(ctx), t.rdb, ns, nil)
	client := jobs.NewClient(t.rdb, jobs.Config{Namespace: ns})
	defer func() { _ = client.Close() }()
	const chunk = 1000
	var batch []jobs.Params
	for i := range backlog + few {
		g := "a"
		if i >= backlog {
			g = "b"
		}
		batch = append(batch, jobs.Params{Args: noopArgs{N: i}, Options: []jobs.Option{jobs.Group(g)}})
		if len(batch) == chunk || i == backlog+few-1 {
			if _, err := client.EnqueueMany(ctx, batch); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}
	pool, err := worker.NewPool(t.rdb, poolConfig(ns, conc, map[string]int{jobs.DefaultQueue: 1}))
	if err != nil {
		return nil, err
	}
	var aStarted, bLeft atomic.Int64
	bLeft.Store(int64(few))
	r := &FairnessResult{Backlog: backlog, Few: few, Concurrency: conc}
	done := make(chan struct{})
	var t0 time.Time
	if err := worker.Register(pool, jobs.WorkFunc[noopArgs](func(_ context.Context, j *jobs.Job[noopArgs]) error {
		if j.Args.N < backlog {
			aStarted.Add(1)
		} else if bLeft.Add(-1) == 0 {
			r.AStartedBeforeLastB = aStarted.Load()
			r.LastBMillis = round(float64(time.Since(t0).Microseconds())/1000, 1)
			close(done)
		}
		return nil
	})); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	t0 = time.Now()
	go func() { ran <- pool.Run(rctx) }()
	select {
	case <-done:
	case err := <-ran:
		return nil, fmt.Errorf("fairness: the pool stopped: %v", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cancel()
	<-ran
	return r, nil
}
