package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/watchdog"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// ErrConfig means NewPool refused its arguments: a nil Redis client or an
// invalid Config. Every such error matches it (an invalid Config.Jobs or
// queue name matches jobs.ErrInvalid as well), and its text says which
// field is wrong. Register, AddPeriodic and Run return it for a nil *Pool
// (the pool of a NewPool call whose error went unchecked) or a zero Pool
// (one NewPool did not make), and Run when
// the Sentinels of Config.Jobs.Sentinel monitor no master of its name.
var ErrConfig = errors.New("worker: invalid config")

// errNilPool is what the methods of a Pool NewPool did not make return.
var errNilPool = fmt.Errorf("%w: nil or zero *Pool: create it with NewPool; a nil one means NewPool failed, and its error says why", ErrConfig)

// unmade reports whether p is nil or a zero Pool, not made by NewPool.
func (p *Pool) unmade() bool { return p == nil || p.ledger == nil }

// configError marks err, NewPool's refusal of its arguments, with
// ErrConfig; its text is err's.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{ErrConfig, e.err} }

// Defaults for Config's zero fields.
const (
	DefaultConcurrency       = 10
	DefaultLeaseTTL          = 10 * time.Second
	DefaultHandlerTimeout    = time.Minute
	DefaultShutdownTimeout   = 10 * time.Second
	DefaultLeaseWait         = time.Second
	DefaultFetchBatch        = 100
	DefaultFetchPollInterval = time.Second
	DefaultCompleteBatch     = 500
	DefaultUnknownKindDefers = 30
	// MinLeaseTTL is the shortest LeaseTTL accepted.
	MinLeaseTTL = 100 * time.Millisecond
	// MaxLeaseTTL is the longest LeaseTTL accepted. A lease is renewed
	// every third of its TTL while the handler runs, so a long job needs no
	// long lease; the ledger's expiry takes a running job's deadline more
	// than a year ahead for a record edited by hand and expires it.
	MaxLeaseTTL = 24 * time.Hour
	// MaxConcurrency is the largest Concurrency accepted: each slot is an
	// executor goroutine and a place in the pool's queues, allocated by
	// NewPool and Run.
	MaxConcurrency = 100_000
	// MaxWorkerIDLen is the longest WorkerID accepted, in bytes.
	MaxWorkerIDLen = 200
	// MinPollInterval is the shortest FetchPollInterval, Maintenance.Interval
	// and Maintenance.PruneInterval accepted: each is a loop's period, and
	// a shorter one turns the loop into a busy loop of Redis calls.
	MinPollInterval = 10 * time.Millisecond
	// MaxMaintenanceInterval is the longest Maintenance.Interval accepted:
	// it is a period of crash recovery, and the resolver's backoff (up to
	// 1024 times it) must stay a valid time.Duration.
	MaxMaintenanceInterval = 24 * time.Hour
)

// Defaults for Config.Maintenance's zero fields.
const (
	DefaultMaintenanceInterval = time.Second
	DefaultMaxReconcileTries   = 5
	DefaultPruneInterval       = time.Minute
	DefaultUncommittedGrace    = 10 * time.Minute
)

// Config configures a Pool. Every zero field takes the default documented
// on it.
type Config struct {
	// Jobs is the namespace and retention of the jobs this pool works: the
	// same jobs.Config the application's jobs.Client is built from, so they
	// are stated once (its Registerer is not used: see Registerer below).
	Jobs jobs.Config
	// Concurrency is the number of jobs run at once (default
	// DefaultConcurrency; at most MaxConcurrency).
	Concurrency int
	// Queues maps queue names to priorities (default {"default": 1}).
	Queues map[string]int
	// StrictPriority drains higher-priority queues first, queues of one
	// priority sharing the slots (each fetch visits them in a random order,
	// each first equally often) (default false: each fetch visits the
	// queues in a random order weighted by priority).
	StrictPriority bool
	// LeaseTTL is each attempt's lease duration, renewed every LeaseTTL/3
	// while the handler runs (default DefaultLeaseTTL; from MinLeaseTTL to
	// MaxLeaseTTL). A crashed worker's
	// job is detected within LeaseTTL + Maintenance.Interval.
	LeaseTTL time.Duration
	// SafetyMargin is how long before its lease's nominal end an attempt
	// stops trusting a lease it could not confirm: an attempt whose leases
	// were not renewed by its local deadline (the send time of the last
	// confirmed claim or renewal + LeaseTTL - SafetyMargin) has its
	// handler's context cancelled with a cause matching lease.ErrLost, even
	// if Redis is unreachable. It covers clock drift between this process and
	// Redis, and applies to the reconciler leader's lease as well (default: a
	// tenth of LeaseTTL, at least 10ms, never more than half of it; a
	// margin above half of LeaseTTL is refused by NewPool).
	SafetyMargin time.Duration
	// HandlerTimeout bounds a handler when the job sets no timeout
	// (default DefaultHandlerTimeout).
	HandlerTimeout time.Duration
	// ShutdownTimeout is how long Run waits for running handlers after its
	// context ends before it cancels theirs (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// LeaseWait is how long an attempt waits for a resource held by another
	// job before the job is put back, due a little later, without consuming
	// an attempt (default DefaultLeaseWait).
	LeaseWait time.Duration
	// FetchBatch caps how many jobs one claim takes from a queue; a claim
	// never takes more than the free slots (default DefaultFetchBatch).
	FetchBatch int
	// FetchPollInterval is how often an idle pool looks for due jobs when no
	// wake-up arrives (default DefaultFetchPollInterval; at least
	// MinPollInterval). Enqueues wake idle pools at once; polling only
	// covers lost wake-ups. The look is one pipelined read of every idle
	// queue's earliest due time (no script): only queues it shows due are
	// claimed.
	FetchPollInterval time.Duration
	// CompleteBatch caps how many outcomes one completion call carries; the
	// completer flushes whatever has accumulated as soon as its previous
	// call returned (default DefaultCompleteBatch).
	CompleteBatch int
	// UnknownKindDefers is how many times a job of a kind this pool has no
	// worker for is put back for another pool (a rolling deploy: an old pool
	// claims a new kind) before it goes dead; the waits grow from 1s to 30s
	// (default DefaultUnknownKindDefers, about 13 minutes; -1: dead at once).
	// While another live pool serving the job's queue runs the kind, the job
	// is put back past this limit too. Put-backs do not consume the job's
	// attempts.
	UnknownKindDefers int
	// RetryDelay gives the delay before retry n (default: exponential from
	// 1s, capped at 5m, with jitter). A negative delay retries at once, one
	// past jobs.MaxDelay is capped at it; a
	// RetryDelay that panics is logged and the default delay is used. A
	// handler error made with jobs.RetryAfter gives its own delay instead.
	// It also gives the delay before the retry of an attempt the
	// maintenance leader's resolver found not applied.
	RetryDelay func(n int) time.Duration
	// WorkerID names this pool in lease owners and logs (default
	// hostname-pid-random): 1 to MaxWorkerIDLen bytes of UTF-8 without
	// control characters, not only white space. It is part of every
	// attempt's fence owner, which httpfence sends as a header. Give each
	// live pool of a namespace its own: Run fails with ErrDuplicateWorkerID
	// when another pool's heartbeat of the id is refreshed while it watches
	// it, and waits for one nobody refreshes (a crashed pool's) to lapse,
	// within 15 s; a pool whose heartbeat replaces
	// another pool's (two started at once) logs it at error level and
	// counts it (fencedq_worker_id_conflicts_total) at every heartbeat:
	// pools sharing one overwrite each other's heartbeat (the list of
	// pools, and the kinds EnqueueRaw finds live pools running, show one of
	// them), and the one that stops removes the other from the list until
	// its next heartbeat.
	WorkerID string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the pool's Prometheus metrics (default: none are
	// exported; the global registry is never used).
	Registerer prometheus.Registerer
	// Maintenance configures the maintenance leader this pool may become.
	Maintenance MaintenanceConfig
	// Middleware wraps every handler call, the first outermost (see
	// Middleware); default none.
	Middleware []Middleware
}

// MaintenanceConfig configures the maintenance leader: one pool of the
// namespace at a time, elected with a fenced lease, runs the expirer, the
// resolver (which reconciles uncertain jobs), the pruner, the status
// service, the periodic service and the outbox relays.
type MaintenanceConfig struct {
	// Disabled keeps this pool out of the leader election: it never runs
	// any maintenance service (no crash recovery, reconciling, pruning,
	// status, periodic ticks or outbox relays from this pool). Another pool
	// of the namespace must run with it enabled.
	Disabled bool
	// PeriodicDisabled stops this pool, when it leads, from enqueueing the
	// ticks of the periodic jobs registered with AddPeriodic; every other
	// service runs as usual. Set it on every pool to pause periodic jobs
	// without stopping crash recovery.
	PeriodicDisabled bool
	// Interval between passes of the expirer, the resolver, the status
	// service, the periodic service and the relays' polls (default
	// DefaultMaintenanceInterval; at least MinPollInterval, at most
	// MaxMaintenanceInterval).
	Interval time.Duration
	// MaxReconcileTries is how many "cannot tell" answers send a job to
	// review (default DefaultMaxReconcileTries); tries back off
	// exponentially from Interval.
	MaxReconcileTries int
	// PruneInterval is how often index entries of finished jobs past
	// retention are removed (default DefaultPruneInterval; at least
	// MinPollInterval).
	PruneInterval time.Duration
	// UncommittedGrace is how long the steps a workflow enqueue wrote in
	// other queues may wait for the commit in its home queue (the client
	// died or failed between the two) before the leader cancels them,
	// "never committed", and records the workflow cancelled (default
	// DefaultUncommittedGrace).
	UncommittedGrace time.Duration
	// EffectLog, when set, answers for kinds without a Reconcile method:
	// an operation id found in the log was applied. When it is also a
	// fence.Fencer (pgfence's and redisfence's Store), the uncertain
	// attempt is first fenced out of its store (its resource's mark raised
	// past its token) before the log or the kind's Reconcile is asked, so
	// an attempt still running cannot apply the operation through that
	// store after either answered "not applied".
	EffectLog fence.EffectLog
	// EffectRetention, when positive and the EffectLog can prune itself
	// (pgfence.Store can), makes the leader's pruner delete effect records
	// older than this every PruneInterval (suggested:
	// pgfence.DefaultEffectRetention). Keep it longer than any job can be
	// retried, reconciled or re-run: at least Jobs.Retention plus the longest a
	// job may wait in review. Default 0: effect records are kept.
	EffectRetention time.Duration
	// Outboxes are transactional outboxes (package pgfence's Outbox) whose
	// committed jobs the leader moves into the queue, on each wake-up and
	// every Interval.
	Outboxes []OutboxRelay
}

// OutboxRelay is a transactional outbox the maintenance leader relays
// into the queue; package pgfence's Outbox implements it.
type OutboxRelay interface {
	// Relay moves up to max committed jobs into the queue through client,
	// fenced by the leader's token, and returns how many rows it relayed
	// and how many it set aside because they cannot be enqueued (one bad
	// row must never stop the others; the leader counts them in
	// fencedq_outbox_rows_set_aside_total). Each job carries an operation
	// id of its own, so a batch relayed twice is enqueued once.
	Relay(ctx context.Context, client *jobs.Client, leader lease.Token, max int) (relayed, setAside int, err error)
	// Listen returns a channel that receives when jobs may have been
	// committed, until ctx ends (nil: the leader polls only).
	Listen(ctx context.Context) <-chan struct{}
	// Name names the outbox in logs.
	Name() string
}

// outboxes returns what the relay services run.
func outboxes(os []OutboxRelay) []maintenance.Outbox {
	out := make([]maintenance.Outbox, len(os))
	for i, o := range os {
		out[i] = maintenance.Outbox{Name: o.Name(), Relay: o.Relay, Listen: o.Listen}
	}
	return out
}

// withDefaults fills zero fields; validate checks the result. Jobs keeps
// the values given when they are invalid (jobs.Config.WithDefaults would
// turn a negative Retention into the default), so validate refuses them
// as jobs.NewClient does.
func (c Config) withDefaults() Config {
	if c.Jobs.Validate() == nil {
		c.Jobs = c.Jobs.WithDefaults()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{jobs.DefaultQueue: 1}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = DefaultHandlerTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.LeaseWait == 0 {
		c.LeaseWait = DefaultLeaseWait
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = DefaultFetchBatch
	}
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = DefaultFetchPollInterval
	}
	if c.CompleteBatch == 0 {
		c.CompleteBatch = DefaultCompleteBatch
	}
	if c.UnknownKindDefers == 0 {
		c.UnknownKindDefers = DefaultUnknownKindDefers
	}
	if c.RetryDelay == nil {
		c.RetryDelay = defaultRetryDelay
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:6])
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Maintenance.Interval == 0 {
		c.Maintenance.Interval = DefaultMaintenanceInterval
	}
	if c.Maintenance.MaxReconcileTries == 0 {
		c.Maintenance.MaxReconcileTries = DefaultMaxReconcileTries
	}
	if c.Maintenance.PruneInterval == 0 {
		c.Maintenance.PruneInterval = DefaultPruneInterval
	}
	if c.Maintenance.UncommittedGrace == 0 {
		c.Maintenance.UncommittedGrace = DefaultUncommittedGrace
	}
	return c
}

func (c Config) validate() error {
	if err := c.Jobs.Validate(); err != nil {
		return err
	}
	for q, prio := range c.Queues {
		if err := jobs.ValidateQueue(q); err != nil {
			return err
		}
		if prio <= 0 {
			return fmt.Errorf("worker: queue %q priority %d must be positive", q, prio)
		}
	}
	// In the fields' order, so a Config with several wrong fields is
	// refused with the same error every time.
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"safety margin", c.SafetyMargin}, {"handler timeout", c.HandlerTimeout},
		{"shutdown timeout", c.ShutdownTimeout}, {"lease wait", c.LeaseWait},
		{"fetch poll interval", c.FetchPollInterval}, {"maintenance interval", c.Maintenance.Interval},
		{"prune interval", c.Maintenance.PruneInterval}, {"uncommitted grace", c.Maintenance.UncommittedGrace},
		{"effect retention", c.Maintenance.EffectRetention},
	} {
		if f.d < 0 {
			return fmt.Errorf("worker: %s %v is negative", f.name, f.d)
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{
		{"fetch batch", c.FetchBatch}, {"complete batch", c.CompleteBatch},
		{"maintenance max reconcile tries", c.Maintenance.MaxReconcileTries},
	} {
		if f.n < 0 {
			return fmt.Errorf("worker: %s %d is negative", f.name, f.n)
		}
	}
	if err := validateWorkerID(c.WorkerID); err != nil {
		return err
	}
	for i, m := range c.Middleware {
		if m == nil {
			return fmt.Errorf("worker: middleware %d is nil", i)
		}
	}
	for i, o := range c.Maintenance.Outboxes {
		if argtype.IsNil(o) {
			return fmt.Errorf("worker: maintenance outbox %d is nil", i)
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"fetch poll interval", c.FetchPollInterval}, {"maintenance interval", c.Maintenance.Interval},
		{"prune interval", c.Maintenance.PruneInterval},
	} {
		if f.d < MinPollInterval {
			return fmt.Errorf("worker: %s %v below %v", f.name, f.d, MinPollInterval)
		}
	}
	switch {
	case c.Maintenance.Interval > MaxMaintenanceInterval:
		return fmt.Errorf("worker: maintenance interval %v above %v", c.Maintenance.Interval, MaxMaintenanceInterval)
	case c.Concurrency < 0:
		return fmt.Errorf("worker: concurrency %d is negative", c.Concurrency)
	case c.Concurrency > MaxConcurrency:
		return fmt.Errorf("worker: concurrency %d above %d", c.Concurrency, MaxConcurrency)
	case c.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("worker: lease TTL %v below %v", c.LeaseTTL, MinLeaseTTL)
	case c.LeaseTTL > MaxLeaseTTL:
		return fmt.Errorf("worker: lease TTL %v above %v", c.LeaseTTL, MaxLeaseTTL)
	case c.Maintenance.EffectRetention > 0 && c.Maintenance.EffectRetention < c.Jobs.Retention:
		return fmt.Errorf("worker: effect retention %v is shorter than job retention %v: a re-run could apply an effect twice", c.Maintenance.EffectRetention, c.Jobs.Retention)
	case c.UnknownKindDefers < -1:
		return fmt.Errorf("worker: unknown kind defers %d: want -1 (none) or more", c.UnknownKindDefers)
	}
	if err := watchdog.CheckMargin(c.LeaseTTL, c.SafetyMargin); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// validateWorkerID checks a worker id: it names lease owners (where a line
// break is refused), fence owners (sent as HTTP headers by httpfence) and
// the pool in logs, heartbeats and the CLI.
func validateWorkerID(id string) error {
	switch {
	case len(id) > MaxWorkerIDLen:
		return fmt.Errorf("worker: worker id longer than %d bytes", MaxWorkerIDLen)
	case strings.TrimSpace(id) == "":
		return fmt.Errorf("worker: worker id %q is blank", id)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("worker: worker id %q must be UTF-8 without control characters", id)
	}
	return nil
}

func defaultRetryDelay(n int) time.Duration {
	d := time.Second << min(n, 9)
	d = min(d, 5*time.Minute)
	return d/2 + rand.N(d/2+1)
}
