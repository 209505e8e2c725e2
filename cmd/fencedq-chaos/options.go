package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// errHelp is returned after --help printed the usage (exit code 0).
var errHelp = errors.New("help")

// defaultDatabaseURL is used when neither --database-url nor DATABASE_URL is set.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// pgInstallHint tells a reader how to get a PostgreSQL the run can use.
const pgInstallHint = "set DATABASE_URL (or --database-url) to a PostgreSQL you may create schemas in, or install and start one " +
	"(Debian/Ubuntu: apt-get install -y postgresql && pg_ctlcluster $(ls /etc/postgresql) main start; " +
	"macOS: brew install postgresql && brew services start postgresql) that accepts " + defaultDatabaseURL

// options configure one chaos run.
type options struct {
	Duration          time.Duration `json:"duration"`
	Rate              float64       `json:"rate"`
	Accounts          int           `json:"accounts"`
	Workers           int           `json:"workers"`
	Concurrency       int           `json:"concurrency"`
	Careless          int           `json:"careless"`
	LeaseTTL          time.Duration `json:"lease_ttl"`
	HandlerTimeout    time.Duration `json:"handler_timeout"`
	ReconcileInterval time.Duration `json:"reconcile_interval"`
	Dup               float64       `json:"dup"`
	PriorityCopies    float64       `json:"priority_copies"`
	Overdrafts        float64       `json:"overdrafts"`
	// LimitPerAccount and RateLimit put the workload under flow control
	// (0: off; see checklimits.go).
	LimitPerAccount  int           `json:"limit_per_account,omitempty"`
	RateLimit        int           `json:"rate_limit,omitempty"`
	FaultGap         time.Duration `json:"fault_gap"`
	MaxPauses        int           `json:"max_pauses"`
	MaxKills         int           `json:"max_kills"`
	MaxRedisRestarts int           `json:"max_redis_restarts"`
	MaxStalls        int           `json:"max_stalls"`
	MaxSlowdowns     int           `json:"max_slowdowns"`
	LongPauses       int           `json:"long_pauses"`
	LongPause        time.Duration `json:"long_pause"`
	Drain            time.Duration `json:"drain"`
	Seed             uint64        `json:"seed"`
	Baseline         string        `json:"baseline,omitempty"`
	// Failover runs Redis as a primary, a replica and a Sentinel, and adds
	// the failover faults in FailoverKinds.
	Failover      bool          `json:"failover,omitempty"`
	FailoverKinds []string      `json:"failover_faults,omitempty"`
	MaxFailovers  int           `json:"max_failovers,omitempty"`
	FailoverGap   time.Duration `json:"failover_gap,omitempty"`
	ClockOffset   time.Duration `json:"clock_offset,omitempty"`
	// Durable runs fencedq (the client and every worker; the bridge's
	// workers with --baseline asynq-bridge) with durable acknowledgements
	// (durability: one replica) and makes every acknowledged job lost a
	// violation even across failovers. Plain asynq has no such mode: with
	// --baseline asynq only the verdict changes.
	Durable bool `json:"durable,omitempty"`
	// Cluster runs Redis as a Redis Cluster of this many masters (AOF
	// each; 0: one server); Partitions declares the workload's queues with
	// that many partitions (0 or 1: none).
	Cluster    int `json:"cluster,omitempty"`
	Partitions int `json:"partitions,omitempty"`
	// Workflows submits each operation as a workflow: the transfer, then a
	// ledger entry, then a notification (see checkworkflows.go).
	Workflows bool `json:"workflows,omitempty"`
	// IdleInTransaction, when set, is the workers' PostgreSQL
	// idle_in_transaction_session_timeout: the server aborts the open
	// transaction of a worker frozen mid-transfer (a long pause), releasing
	// its row locks, instead of every transfer of the same accounts
	// blocking until the worker wakes up.
	IdleInTransaction time.Duration `json:"idle_in_transaction,omitempty"`
	JSON              bool          `json:"-"`
	Keep              bool          `json:"-"`
	DatabaseURL       string        `json:"-"`
	LogLevel          string        `json:"-"`
	// Progress receives progress lines (stderr).
	Progress io.Writer `json:"-"`
	// afterCheck, set by tests, runs after the checker and before teardown;
	// recheck runs the checker again on the same run.
	afterCheck func(ctx context.Context, e *runEnv, recheck func() (*report, error)) error
}

// initialCents is every account's opening balance.
const initialCents = 1_000_000

// parseOptions reads the chaos run's flags; --help returns errHelp.
func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{Progress: stderr}
	fs := flag.NewFlagSet("fencedq-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: fencedq-chaos [flags]")
		fmt.Fprintln(stderr, "\nRuns bank transfers in fencedq worker processes under pauses, kills, Redis")
		fmt.Fprintln(stderr, "restarts and PostgreSQL stalls, then checks money, effects, tokens and jobs.")
		fmt.Fprintln(stderr, "Needs redis-server and PostgreSQL. Exit codes: 0 clean, 1 violation, 2 usage.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	fs.DurationVar(&o.Duration, "duration", 3*time.Minute, "how long submissions and faults go on")
	fs.Float64Var(&o.Rate, "rate", 20, "transfer submissions per second")
	fs.IntVar(&o.Accounts, "accounts", 20, "number of bank accounts")
	fs.IntVar(&o.Workers, "workers", 4, "worker processes")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "jobs run at once per worker process")
	fs.IntVar(&o.Careless, "careless", 1, "worker slots whose storage calls ignore the handler's cancellation (a paused one wakes up and writes anyway)")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 1500*time.Millisecond, "lease TTL of every attempt")
	fs.DurationVar(&o.HandlerTimeout, "handler-timeout", 2*time.Second, "handler timeout (a stall longer than this times calls out)")
	fs.DurationVar(&o.ReconcileInterval, "reconcile-interval", 500*time.Millisecond, "the maintenance leader's interval (expiry, reconciling)")
	fs.Float64Var(&o.Dup, "dup", 0.1, "fraction of submissions that repeat an operation id (half of them concurrently)")
	fs.Float64Var(&o.PriorityCopies, "priority-copies", 0.02, "fraction of operations also submitted to the priority queue")
	fs.Float64Var(&o.Overdrafts, "overdrafts", 0.01, "fraction of transfers that cannot be covered and must end dead")
	fs.IntVar(&o.LimitPerAccount, "limit-per-account", 0, "concurrency limit of transfers into one account (jobs.Limit; 0: none); the checker adds \"never more than N holders\"")
	fs.IntVar(&o.RateLimit, "rate-limit", 0, "rate limit of transfer starts per second (jobs.Rate; 0: none); the checker adds \"rate never exceeded\"")
	fs.DurationVar(&o.FaultGap, "fault-gap", 2*time.Second, "mean pause between two faults of one nemesis lane")
	fs.IntVar(&o.MaxPauses, "max-pauses", 1000, "most SIGSTOP pauses (0 disables)")
	fs.IntVar(&o.MaxKills, "max-kills", 1000, "most SIGKILLs of a worker (0 disables)")
	fs.IntVar(&o.MaxRedisRestarts, "max-redis-restarts", 1000, "most redis-server restarts (0 disables)")
	fs.IntVar(&o.MaxStalls, "max-stalls", 1000, "most PostgreSQL answer stalls (0 disables)")
	fs.IntVar(&o.MaxSlowdowns, "max-slowdowns", 1000, "most PostgreSQL slowdowns (0 disables)")
	fs.IntVar(&o.LongPauses, "long-pauses", 0, "pauses longer than asynq's own lease (see --long-pause)")
	fs.DurationVar(&o.LongPause, "long-pause", 75*time.Second, "length of a long pause")
	fs.DurationVar(&o.Drain, "drain", 3*time.Minute, "longest wait for the system to settle after the faults stop")
	fs.Uint64Var(&o.Seed, "seed", 0, "random seed (0: from the clock)")
	fs.StringVar(&o.Baseline, "baseline", "", `"asynq": run the unfenced asynq baseline instead of fencedq; "asynq-bridge": the same asynq servers with the handler under the asynqfence middleware`)
	fs.BoolVar(&o.Failover, "failover", false, "run Redis as a primary, a replica and a Sentinel (clients follow it with redis.NewFailoverClient) and fail the primary over")
	failoverFaults := fs.String("failover-faults", "healthy,lagging,clock", "with --failover, the failover faults: healthy (replica in sync), lagging (replication cut before the kill), clock (cut, and the promoted node's clock shifted by --clock-offset); with --cluster: kill (SIGKILL of a master, its replica promoted), lagging (the same, replication cut 3-5s before) and coordinated (CLUSTER FAILOVER), all by default")
	fs.IntVar(&o.MaxFailovers, "max-failovers", 1000, "most failovers of each kind (0 disables)")
	fs.DurationVar(&o.FailoverGap, "failover-gap", 10*time.Second, "with --failover, mean pause between two faults of the Redis lane (failovers, replica restarts)")
	fs.DurationVar(&o.ClockOffset, "clock-offset", -120*time.Second, "clock failovers shift the promoted node's wall clock (Redis TIME) by this much (negative: behind)")
	fs.BoolVar(&o.Durable, "durable", false, "durable acknowledgements (one replica must hold each enqueue, claim and completion; fencedq and the bridge), and an acknowledged job lost in a failover is a violation, not a finding")
	fs.IntVar(&o.Cluster, "cluster", 0, "run Redis as a Redis Cluster of this many masters (AOF each; redis restarts hit one master at a time); fencedq only; with --failover each master gets a replica and masters fail over")
	fs.IntVar(&o.Partitions, "partitions", 0, "declare the workload's queues with this many partitions (Client.SetPartitions; fencedq only)")
	fs.BoolVar(&o.Workflows, "workflows", false, "submit each operation as a workflow: transfer → ledger entry → notification (the notification in the priority queue); the checker adds \"every step once, never before its dependency, every workflow final, every dependent promoted once\"; fencedq on one server only")
	fs.DurationVar(&o.IdleInTransaction, "pg-idle-in-transaction", 0, "the workers' PostgreSQL idle_in_transaction_session_timeout (0: the server's, off by default): aborts a frozen worker's transaction and releases its row locks")
	fs.BoolVar(&o.JSON, "json", false, "print the report as one JSON object")
	fs.BoolVar(&o.Keep, "keep", false, "keep the schema, the Redis directory and the worker logs")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "PostgreSQL URL (default $DATABASE_URL, else "+defaultDatabaseURL+")")
	fs.StringVar(&o.LogLevel, "log-level", "warn", "worker log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.DatabaseURL == "" {
		o.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	if o.Failover && *failoverFaults != "" {
		kinds, names := failoverKinds, "healthy, lagging, clock"
		if o.Cluster > 0 {
			kinds, names = clusterFailoverKinds, "kill, lagging, coordinated"
			if !flagSet(fs, "failover-faults") {
				*failoverFaults = "kill,lagging,coordinated"
			}
		}
		seen := map[string]bool{}
		for _, k := range strings.Split(*failoverFaults, ",") {
			kind, ok := kinds[strings.TrimSpace(k)]
			if !ok {
				return nil, fmt.Errorf("%w: --failover-faults: unknown fault %q (%s)", errUsage, k, names)
			}
			if !seen[kind] {
				seen[kind] = true
				o.FailoverKinds = append(o.FailoverKinds, kind)
			}
		}
	}
	if o.DatabaseURL == "" {
		o.DatabaseURL = defaultDatabaseURL
	}
	switch {
	case o.Baseline != "" && o.Baseline != "asynq" && o.Baseline != "asynq-bridge":
		return nil, fmt.Errorf(`%w: --baseline must be "asynq" or "asynq-bridge"`, errUsage)
	case (o.Cluster != 0 || o.Partitions > 1) && o.Baseline != "":
		return nil, fmt.Errorf("%w: --cluster and --partitions run fencedq only, without --baseline", errUsage)
	case o.Workflows && (o.Baseline != "" || o.Failover || o.Cluster != 0 || o.Partitions > 1):
		return nil, fmt.Errorf("%w: --workflows runs fencedq on one server only (no --baseline, --failover, --cluster or --partitions)", errUsage)
	case o.Cluster == 0 && o.Partitions > 1 && o.Failover:
		return nil, fmt.Errorf("%w: --partitions with --failover needs --cluster", errUsage)
	case o.Cluster < 0 || o.Cluster == 1 || o.Cluster == 2 || o.Cluster > 16:
		return nil, fmt.Errorf("%w: --cluster must be 0 or 3 to 16 masters", errUsage)
	case o.Partitions < 0 || o.Partitions > jobs.MaxPartitions:
		return nil, fmt.Errorf("%w: --partitions must be between 0 and %d", errUsage, jobs.MaxPartitions)
	case o.Duration < 5*time.Second:
		return nil, fmt.Errorf("%w: --duration must be at least 5s", errUsage)
	case o.LimitPerAccount < 0 || o.RateLimit < 0:
		return nil, fmt.Errorf("%w: --limit-per-account and --rate-limit must be 0 (off) or positive", errUsage)
	case o.Rate <= 0:
		return nil, fmt.Errorf("%w: --rate must be positive", errUsage)
	case o.Accounts < 2:
		return nil, fmt.Errorf("%w: --accounts must be at least 2", errUsage)
	case o.Workers < 2:
		return nil, fmt.Errorf("%w: --workers must be at least 2 (one is paused or killed at a time)", errUsage)
	case o.Concurrency < 1:
		return nil, fmt.Errorf("%w: --concurrency must be positive", errUsage)
	case o.IdleInTransaction < 0 || (o.IdleInTransaction > 0 && o.IdleInTransaction < time.Millisecond):
		return nil, fmt.Errorf("%w: --pg-idle-in-transaction must be 0 or at least 1ms", errUsage)
	case o.Careless < 0 || o.Careless > o.Workers:
		return nil, fmt.Errorf("%w: --careless must be between 0 and --workers", errUsage)
	case o.LeaseTTL < 100*time.Millisecond:
		return nil, fmt.Errorf("%w: --lease-ttl must be at least 100ms", errUsage)
	case o.HandlerTimeout <= 0 || o.ReconcileInterval <= 0 || o.FaultGap <= 0 || o.Drain <= 0 || o.LongPause <= 0 || o.FailoverGap <= 0:
		return nil, fmt.Errorf("%w: durations must be positive", errUsage)
	case o.Dup < 0 || o.Dup > 0.9 || o.PriorityCopies < 0 || o.PriorityCopies > 1 || o.Overdrafts < 0 || o.Overdrafts > 1:
		return nil, fmt.Errorf("%w: --dup must be in [0, 0.9]; --priority-copies and --overdrafts in [0, 1]", errUsage)
	case o.MaxPauses < 0 || o.MaxKills < 0 || o.MaxRedisRestarts < 0 || o.MaxStalls < 0 || o.MaxSlowdowns < 0 || o.LongPauses < 0 || o.MaxFailovers < 0:
		return nil, fmt.Errorf("%w: fault limits must not be negative", errUsage)
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	return o, nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
