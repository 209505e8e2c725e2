package main

import (
	"context"
	"fmt"
	"io"

	"github.com/fencedq/fencedq/jobs"
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
	return r, nil
}

// printGroups writes the groups section's table.
func printGroups(w io.Writer, r *GroupsResult) {
	fmt.Fprintf(w, "\ngroups: %d no-op jobs drained, concurrency %d, median of %d\n", r.Jobs, r.Concurrency, r.Repeat)
	// Besides Redis's CPU: the commands it ran and its time in scripts
	// (commandstats), per job.
	row := func(name string, v Variant, vs string) {
		fmt.Fprintf(w, "  %-12s %8.0f jobs/s  Redis CPU %5.1f µs/job  script time %5.1f µs/job  Redis commands %.2f/job%s\n", name,
			v.JobsPerSec, v.PerJob.RedisCPUMicros, v.PerJob.ServerMicrosByCommand["evalsha"], v.PerJob.ServerCommands, vs)
	}
	row("ungrouped", r.Plain, "")
	row("one group", r.One, fmt.Sprintf("  (%s, Redis CPU %+.1f%%)", slowerText(r.OneSlowerPct), r.OneCPUMorePct))
	row("1000 groups", r.Thousand, fmt.Sprintf("  (%s, Redis CPU %+.1f%%)", slowerText(r.ThousandSlowerPct), r.ThousandCPUMorePct))
	fmt.Fprintf(w, "  target ≤ %.0f%% Redis CPU per job: %s\n", r.Target,
		verdict(r.OneCPUMorePct <= r.Target && r.ThousandCPUMorePct <= r.Target))
}
