package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	ctx, stop := cli.SignalContext("fencedq-bench", os.Stderr)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencedq-bench:", err)
		os.Exit(1)
	}
}

// allSections lists the sections in the order they run.
var allSections = []string{"noop", "queues", "enqueue", "latency", "cluster", "partitions", "lease", "memory", "postgres", "bridge", "outbox", "recovery", "durable", "limits", "groups", "workflows"}

// options are the parsed flags.
type options struct {
	jobs, repeat, concurrency, kills int
	// concurrencies are the noop section's handler concurrencies; the other
	// sections use the first (concurrency).
	concurrencies                  []int
	enqueueJobs, enqueueGoroutines int
	enqueueBatch                   int
	latencyRate                    float64
	latencyDuration                time.Duration
	sections                       []string
	jsonOut, quiet                 bool
	redisAddr                      string
	clusterAddrs                   []string
	pgURL                          string
	pgJobs                         int
	leaseOps, leaseGoroutines      int
	leaseResources                 int
	clusterJobs, clusterQueues     int
	partitionCounts                []int
	memoryJobs                     int
	outboxJobs                     int
	outboxRate                     float64
	outboxDuration                 time.Duration
	recoveryModes                  []string
	recoveryTimeout                time.Duration
	cpuProfile                     string
	workflowRuns                   int
	groupsBacklog                  int
}

func (o *options) has(section string) bool { return slices.Contains(o.sections, section) }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("fencedq-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.jobs, "jobs", 10000, "no-op jobs per timed run (noop section)")
	fs.IntVar(&o.repeat, "repeat", 3, "repetitions of every timed comparison; medians are reported")
	conc := fs.String("concurrency", "10,50", "handler concurrencies of the noop section (comma-separated); every other section uses the first")
	fs.IntVar(&o.kills, "kills", 5, "worker processes killed per recovery variant")
	sections := fs.String("sections", strings.Join(allSections, ","), "comma-separated sections to run: "+strings.Join(allSections, ","))
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object on stdout (the table goes to stderr)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.redisAddr, "redis", "", "use this Redis (host:port) instead of starting redis-server; its INFO counters are shared with other clients")
	cluster := fs.String("cluster-addrs", "", "use this Redis Cluster (comma-separated masters) instead of starting three nodes")
	fs.StringVar(&o.pgURL, "pg", "", "PostgreSQL URL (default $DATABASE_URL, else "+defaultPG+")")
	fs.IntVar(&o.pgJobs, "pg-jobs", 0, "jobs per timed run in the postgres section (default jobs/2)")
	fs.IntVar(&o.leaseOps, "lease-ops", 20000, "acquire+release pairs per timed run and library (lease section)")
	fs.IntVar(&o.leaseGoroutines, "lease-goroutines", 8, "goroutines acquiring and releasing leases")
	fs.IntVar(&o.leaseResources, "lease-resources", 1000, "distinct resources, split between the goroutines (no contention)")
	fs.IntVar(&o.enqueueJobs, "enqueue-jobs", 0, "jobs per timed run in the enqueue section (default jobs)")
	fs.IntVar(&o.enqueueGoroutines, "enqueue-goroutines", 8, "goroutines calling Enqueue (and EnqueueMany) in the enqueue section")
	fs.IntVar(&o.enqueueBatch, "enqueue-batch", 100, "jobs per EnqueueMany call in the enqueue section")
	fs.Float64Var(&o.latencyRate, "latency-rate", 1000, "jobs per second offered in the latency section")
	fs.DurationVar(&o.latencyDuration, "latency-duration", 20*time.Second, "how long the latency section offers jobs, per run and side")
	fs.IntVar(&o.outboxJobs, "outbox-jobs", 0, "jobs per timed run in the outbox section (default jobs/2)")
	fs.Float64Var(&o.outboxRate, "outbox-rate", 200, "jobs per second offered in the outbox section's latency runs")
	fs.DurationVar(&o.outboxDuration, "outbox-duration", 10*time.Second, "how long the outbox section's latency runs offer jobs, per run and side")
	fs.IntVar(&o.workflowRuns, "workflow-runs", 20, "workflows run one at a time per graph in the workflows section")
	fs.IntVar(&o.groupsBacklog, "groups-backlog", 100000, "pending jobs of one group ahead of another group's 10 in the groups section's fairness measurement")
	fs.IntVar(&o.clusterJobs, "cluster-jobs", 0, "jobs per timed run in the cluster section (default jobs/2)")
	fs.IntVar(&o.clusterQueues, "cluster-queues", 6, "queues the cluster section spreads jobs over")
	partitionCounts := fs.String("partition-counts", "1,3,6,12", "the partitions section's partition counts of its one queue (cluster-jobs jobs each)")
	fs.IntVar(&o.memoryJobs, "memory-jobs", 0, "finished jobs retained per memory measurement (default jobs/2)")
	modes := fs.String("recovery-modes", "asynq,fencedq-2s,fencedq-5s", "recovery variants: asynq and fencedq-<lease TTL>, e.g. fencedq-2s")
	fs.DurationVar(&o.recoveryTimeout, "recovery-timeout", 0, "give up on one kill after this long (default: 150s for asynq, 10×TTL+10s for fencedq)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the benchmark process to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.sections = splitList(*sections)
	for _, s := range o.sections {
		if !slices.Contains(allSections, s) {
			return nil, fmt.Errorf("unknown section %q (have %s)", s, strings.Join(allSections, ","))
		}
	}
	for _, c := range splitList(*conc) {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not a positive integer", c)
		}
		o.concurrencies = append(o.concurrencies, n)
	}
	if len(o.concurrencies) == 0 {
		return nil, errors.New("--concurrency: give at least one value")
	}
	o.concurrency = o.concurrencies[0]
	if o.enqueueJobs <= 0 {
		o.enqueueJobs = o.jobs
	}
	o.clusterAddrs = splitList(*cluster)
	o.recoveryModes = splitList(*modes)
	for _, m := range o.recoveryModes {
		if _, err := parseMode(m); err != nil {
			return nil, err
		}
	}
	if o.pgURL == "" {
		o.pgURL = os.Getenv("DATABASE_URL")
	}
	if o.pgURL == "" {
		o.pgURL = defaultPG
	}
	if o.pgJobs <= 0 {
		o.pgJobs = max(o.jobs/2, 1)
	}
	if o.outboxJobs <= 0 {
		o.outboxJobs = max(o.jobs/2, 1)
	}
	if o.clusterJobs <= 0 {
		o.clusterJobs = max(o.jobs/2, 1)
	}
	if o.memoryJobs <= 0 {
		o.memoryJobs = max(o.jobs/2, 1)
	}
	for _, f := range splitList(*partitionCounts) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > jobs.MaxPartitions {
			return nil, fmt.Errorf("--partition-counts: %q is not a count of 1-%d", f, jobs.MaxPartitions)
		}
		o.partitionCounts = append(o.partitionCounts, n)
	}
	switch {
	case o.jobs < 1 || o.repeat < 1 || o.concurrency < 1 || o.kills < 1 || o.workflowRuns < 1 || o.groupsBacklog < 1:
		return nil, errors.New("--jobs, --repeat, --concurrency, --kills, --workflow-runs and --groups-backlog must be positive")
	case o.leaseOps < 1 || o.leaseGoroutines < 1 || o.leaseResources < 1 || o.clusterQueues < 1:
		return nil, errors.New("--lease-ops, --lease-goroutines, --lease-resources and --cluster-queues must be positive")
	case o.enqueueGoroutines < 1 || o.enqueueBatch < 1 || !(o.latencyRate > 0) || o.latencyDuration <= 0:
		return nil, errors.New("--enqueue-goroutines, --enqueue-batch, --latency-rate and --latency-duration must be positive")
	case !(o.outboxRate > 0) || o.outboxDuration <= 0:
		return nil, errors.New("--outbox-rate and --outbox-duration must be positive")
	}
	o.leaseResources = max(o.leaseResources, o.leaseGoroutines)
	return o, nil
}

// settle gives the next section a clean start: the previous section's
// garbage collected and returned, and a moment for its servers' and
// workers' shutdown to finish.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(2 * time.Second)
}

// discardLogger drops every log record without formatting it.
var discardLogger = slog.New(slog.DiscardHandler)

// bench is one benchmark run.
type bench struct {
	opts     *options
	stderr   io.Writer
	kids     *children
	single   *target
	clusterT *target
	// singleAddr is the single server's address, handed to worker processes.
	singleAddr string
	// workerExe is the executable re-run as "worker" for the recovery section.
	workerExe string
}

func (e *bench) progress(format string, args ...any) {
	if !e.opts.quiet {
		fmt.Fprintf(e.stderr, format+"\n", args...)
	}
}

// Report is the JSON object --json prints. A section that was not run is null.
type Report struct {
	Machine  Machine         `json:"machine"`
	Settings map[string]any  `json:"settings"`
	Noop     *NoopResult     `json:"noop"`
	Enqueue  *EnqueueResult  `json:"enqueue"`
	Latency  *LatencyResult  `json:"latency"`
	Postgres *PostgresResult `json:"postgres"`
	Bridge   *BridgeResult   `json:"bridge"`
	Outbox   *OutboxResult   `json:"outbox"`
	Lease    *LeaseResult    `json:"lease"`
	Recovery *RecoveryResult `json:"recovery"`
	Memory   *MemoryResult   `json:"memory"`
	Cluster  *ClusterResult  `json:"cluster"`
	// Partitions is one queue with 1, 3, 6, ... partitions on the cluster.
	Partitions *PartitionsResult `json:"partitions"`
	Durable    *DurableResult    `json:"durable"`
	Queues     *QueuesResult     `json:"queues"`
	Limits     *LimitsResult     `json:"limits"`
	Groups     *GroupsResult     `json:"groups"`
	Workflows  *WorkflowsResult  `json:"workflows"`
	// Errors maps a section that failed to its error.
	Errors map[string]string `json:"errors,omitempty"`
	// Seconds is the wall time of the whole run.
	Seconds float64 `json:"seconds"`
}

// run is the benchmark program without its process plumbing: it parses
// args, runs the selected sections and writes the table (and JSON).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	began := time.Now()
	e := &bench{opts: opts, stderr: stderr, kids: newChildren()}
	defer e.kids.cleanup()
	if e.workerExe, err = os.Executable(); err != nil {
		return err
	}
	if err := e.setup(ctx); err != nil {
		return err
	}
	rep := &Report{Errors: map[string]string{}, Settings: map[string]any{
		"jobs": opts.jobs, "repeat": opts.repeat, "concurrency": opts.concurrencies, "kills": opts.kills,
		"enqueue_jobs": opts.enqueueJobs, "enqueue_goroutines": opts.enqueueGoroutines, "enqueue_batch": opts.enqueueBatch,
		"latency_rate": opts.latencyRate, "latency_duration_s": opts.latencyDuration.Seconds(),
		"sections": opts.sections, "pg_jobs": opts.pgJobs, "lease_ops": opts.leaseOps,
		"lease_goroutines": opts.leaseGoroutines, "lease_resources": opts.leaseResources,
		"cluster_jobs": opts.clusterJobs, "cluster_queues": opts.clusterQueues, "partition_counts": opts.partitionCounts, "memory_jobs": opts.memoryJobs,
		"outbox_jobs": opts.outboxJobs, "outbox_rate": opts.outboxRate, "outbox_duration_s": opts.outboxDuration.Seconds(),
		"recovery_modes": opts.recoveryModes, "workflow_runs": opts.workflowRuns, "groups_backlog": opts.groupsBacklog, "redis_started_by_bench": opts.redisAddr == "",
	}}
	rep.Machine = machine(ctx, e.single.rdb, opts.pgURL)
	for _, s := range allSections {
		if !opts.has(s) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		settle()
		e.progress("== %s", s)
		t0 := time.Now()
		var err error
		switch s {
		case "noop":
			rep.Noop, err = e.noop(ctx)
		case "enqueue":
			rep.Enqueue, err = e.enqueue(ctx)
		case "latency":
			rep.Latency, err = e.latency(ctx)
		case "cluster":
			rep.Cluster, err = e.cluster(ctx)
		case "partitions":
			rep.Partitions, err = e.partitions(ctx)
		case "lease":
			rep.Lease, err = e.lease(ctx)
		case "memory":
			rep.Memory, err = e.memory(ctx)
		case "postgres":
			rep.Postgres, err = e.postgres(ctx)
		case "bridge":
			rep.Bridge, err = e.bridge(ctx)
		case "outbox":
			rep.Outbox, err = e.outbox(ctx)
		case "recovery":
			rep.Recovery, err = e.recovery(ctx)
		case "durable":
			rep.Durable, err = e.durable(ctx)
		case "queues":
			rep.Queues, err = e.queues(ctx)
		case "limits":
			rep.Limits, err = e.limits(ctx)
		case "groups":
			rep.Groups, err = e.groups(ctx)
		case "workflows":
			rep.Workflows, err = e.workflows(ctx)
		}
		if err != nil {
			rep.Errors[s] = err.Error()
			e.progress("   %s failed: %v", s, err)
		}
		e.progress("   %s took %.1fs", s, time.Since(t0).Seconds())
	}
	rep.Seconds = round(time.Since(began).Seconds(), 1)
	rep.Machine.LoadAvgEnd = loadAvg()
	table := stdout
	if opts.jsonOut {
		table = stderr
	}
	printTable(table, rep)
	if opts.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(rep.Errors) > 0 {
		names := make([]string, 0, len(rep.Errors))
		for k := range rep.Errors {
			names = append(names, k)
		}
		slices.Sort(names)
		return fmt.Errorf("sections failed: %s", strings.Join(names, ", "))
	}
	return nil
}

// setup connects to (or starts) the single server.
func (e *bench) setup(ctx context.Context) error {
	addr := e.opts.redisAddr
	if addr == "" {
		s, err := e.kids.startRedis(ctx, false)
		if err != nil {
			return err
		}
		addr = s.Addr
	}
	e.singleAddr = addr
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", addr, err)
	}
	var err error
	if e.single, err = newTarget(ctx, "single", rdb, []string{addr}); err != nil {
		return err
	}
	return nil
}

// setupCluster connects to (or starts) the Redis Cluster.
func (e *bench) setupCluster(ctx context.Context) error {
	addrs := e.opts.clusterAddrs
	if len(addrs) == 0 {
		e.progress("  starting a 3-master Redis Cluster")
		var err error
		if addrs, err = e.kids.startCluster(ctx); err != nil {
			return err
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	if err := cc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis cluster %v: %w", addrs, err)
	}
	var err error
	e.clusterT, err = newTarget(ctx, "cluster", cc, addrs)
	return err
}

// Machine describes where the figures came from.
type Machine struct {
	CPUs            int    `json:"cpus"`
	CPUModel        string `json:"cpu_model"`
	GoVersion       string `json:"go_version"`
	OS              string `json:"os"`
	Kernel          string `json:"kernel,omitempty"`
	RedisVersion    string `json:"redis_version"`
	PostgresVersion string `json:"postgres_version,omitempty"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's 1-minute load when
	// the run started and ended: other work on the machine skews figures.
	LoadAvgStart string `json:"load_avg_start,omitempty"`
	LoadAvgEnd   string `json:"load_avg_end,omitempty"`
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}

func machine(ctx context.Context, rdb redis.UniversalClient, pgURL string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.RedisVersion = v
			}
		}
	}
	m.PostgresVersion = postgresVersion(ctx, pgURL)
	return m
}
