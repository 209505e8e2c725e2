package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
)

// PartitionsResult is the partitions section: one queue drained on a
// Redis Cluster with 1, 3, 6, ... partitions.
type PartitionsResult struct {
	Jobs        int `json:"jobs"`
	Repeat      int `json:"repeat"`
	Concurrency int `json:"concurrency"`
	Masters     int `json:"masters"`
	// Runs holds one variant per partition count, in order.
	Runs []PartitionsRun `json:"runs"`
}

// PartitionsRun is one partition count's figures.
type PartitionsRun struct {
	Partitions int `json:"partitions"`
	Variant
	// MasterShare is each master's share of the Redis CPU of the median
	// run, in the masters' address order.
	MasterShare []float64 `json:"master_share"`
}

// partitions drains one queue with each partition count of
// --partitions-counts on the cluster.
func (e *bench) partitions(ctx context.Context) (*PartitionsResult, error) {
	if e.clusterT == nil {
		if err := e.setupCluster(ctx); err != nil {
			return nil, err
		}
	}
	t := e.clusterT
	r := &PartitionsResult{Jobs: e.opts.clusterJobs, Repeat: e.opts.repeat, Concurrency: e.opts.concurrency, Masters: len(t.masters)}
	for _, p := range e.opts.partitionCounts {
		e.progress("  %d partition(s)", p)
		var runs []drainRun
		for range e.opts.repeat {
			settle()
			run, err := fencedqDrain(ctx, t, []string{"hot"}, e.opts.clusterJobs, e.opts.concurrency, &drainOpts{partitions: p})
			if err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
		v := variantOf(runs)
		pr := PartitionsRun{Partitions: p, Variant: v}
		addrs := make([]string, 0, len(v.PerJob.RedisCPUMicrosByMaster))
		total := 0.0
		for a, us := range v.PerJob.RedisCPUMicrosByMaster {
			addrs = append(addrs, a)
			total += us
		}
		sort.Strings(addrs)
		for _, a := range addrs {
			pr.MasterShare = append(pr.MasterShare, round(ratio(v.PerJob.RedisCPUMicrosByMaster[a], total), 3))
		}
		r.Runs = append(r.Runs, pr)
	}
	return r, nil
}

// printPartitions writes the partitions section's table.
func printPartitions(w io.Writer, r *PartitionsResult) {
	fmt.Fprintf(w, "\npartitions: one queue, %d no-op jobs drained on a %d-master cluster, concurrency %d, median of %d\n",
		r.Jobs, r.Masters, r.Concurrency, r.Repeat)
	fmt.Fprintf(w, "  %-10s %10s %12s %14s %12s %12s  %s\n", "partitions", "jobs/s", "round trips", "server cmds", "Redis CPU µs", "client CPU µs", "Redis CPU share per master")
	for _, p := range r.Runs {
		share := slices.Clone(p.MasterShare)
		fmt.Fprintf(w, "  %-10d %10.0f %12.3f %14.3f %12.1f %12.1f  %v\n", p.Partitions, p.JobsPerSec,
			p.PerJob.RoundTrips, p.PerJob.ServerCommands, p.PerJob.RedisCPUMicros, p.PerJob.ClientCPUMicros, share)
	}
}
