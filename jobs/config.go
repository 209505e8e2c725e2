package jobs

import (
	"log/slog"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
)

// Config is a Client's configuration. The zero value is usable. A pool
// (package worker) working the same jobs is built from the same Config, so
// namespace and retention are stated once.
type Config struct {
	// Namespace prefixes every key (default DefaultNamespace), so tenants
	// and tests sharing a Redis never collide.
	Namespace string
	// Retention is how long succeeded, dead and cancelled jobs (and their
	// operation ids, which deduplicate enqueues) are kept (default
	// DefaultRetention; at least a second). Give the pools applying it and
	// the clients of a namespace the same: Client.Resubmit sends recorded
	// jobs up to half the retention old, the client's or a pool's shorter
	// one kept with the queue's counters; with those lost too, a client's
	// longer Retention can bring back a finished job whose record expired.
	Retention time.Duration
	// Sentinel, when the Redis client is made by redis.NewFailoverClient,
	// is the same options. Job tokens (minted by the pools' and the asynq
	// bridge's claims) and resource-lease tokens then take their fencing
	// epoch from the Sentinels' config epoch for the master, agreed by
	// election and raised by every failover; without it the epoch is
	// counted in Redis. Either way a token minted after a failover is above
	// every token minted before it (ARCHITECTURE.md, "Tokens").
	Sentinel *redis.FailoverOptions
	// Registerer receives the client's metrics (enqueued, deduplicated at
	// enqueue, rejected as invalid, ledger rewinds detected); default: none
	// are exported.
	Registerer prometheus.Registerer
	// EnqueueMiddleware wraps every enqueue call of a Client built from
	// this Config, the first outermost (see EnqueueMiddleware), the steps
	// of a workflow.Enqueue included. A pool built from it
	// (worker.Config.Jobs) applies it to the jobs its maintenance leader
	// enqueues: periodic ticks and outbox relays.
	EnqueueMiddleware []EnqueueMiddleware
	// Logger receives the client's logs (a detected ledger rewind, the
	// fencing epoch of a new primary); default slog.Default(). A pool logs
	// to its own worker.Config.Logger.
	Logger *slog.Logger
	// RecentEnqueues is how many of its latest acknowledged enqueues the
	// client records, so that after a detected ledger rewind it can
	// re-submit those Redis lost (Client.Resubmit); default
	// DefaultRecentEnqueues, negative: none. The record holds each job's
	// payload (EnqueueRaw's copied): budget about its size times
	// RecentEnqueues of memory. A workflow is one entry holding every
	// step's.
	RecentEnqueues int
	// ResubmitOnRewind makes the client re-submit its recorded enqueues
	// (Client.Resubmit, in the background) as soon as it detects a rewind;
	// a rewind detected while that runs is re-submitted after it.
	ResubmitOnRewind bool
	// Durability makes writes wait for replicas before they are
	// acknowledged (off by default): a client's enqueues and operator
	// actions, and a pool's (worker.Config.Jobs) claims, completions,
	// resource-lease acquisitions and maintenance enqueues (periodic
	// ticks, outbox relays). See Durability.
	Durability Durability
	// Fencer is the store your handlers write through (pgfence's or
	// redisfence's Store; the one a pool's Maintenance.EffectLog names).
	// When set, an operator's decision that a job's last attempt did not
	// apply its operation (Client.Resolve or ResolveSeen: DecideRerun or
	// DecideDead, of a job in uncertain or review) first cuts that attempt
	// off from the store: its resource's mark is raised past the attempt's
	// token (a named resource's through its lease), so an attempt still
	// running (a paused process, a handler that ignores its context)
	// cannot apply the operation after the decision. When that fails
	// nothing is decided and the call fails with an error matching
	// ErrNotFencedOut. Every such decision (a re-run of a dead or
	// cancelled job too, which needs no fence) is held to the job as it
	// was read for it (state, token, run count): a job that moved before
	// the decision was written (re-run and claimed again, its attempt's
	// lease lapsed) fails with ErrWrongState and nothing is written, so
	// it never lands on an attempt not fenced out. Without it the
	// decision is recorded as it is. A pool ignores it: its maintenance
	// leader fences with its Maintenance.EffectLog.
	Fencer fence.Fencer
}

// Durability says how many replicas must hold a write before fencedq
// acknowledges it: each pipeline of batched script calls ends with a Redis
// WAIT (WAITAOF with AOF, where the server has it) on the same connection,
// so one wait covers the whole batch. On Redis Cluster each pipeline goes
// to one master and waits for that master's replicas.
//
// When too few replicas acknowledge within Timeout:
//   - an enqueue fails with an error matching ErrEnqueueUnknown: the job
//     may exist (on the primary, perhaps on no replica). Enqueuing it again
//     with the same operation id is safe: it ends in exactly one job.
//   - a pool's claim is not started: its jobs are put back pending without
//     consuming an attempt (or, if that fails too, come back when their
//     leases expire), so no job runs twice because of it.
//   - a pool's completion is retried (a retry that finds the outcome
//     applied by the first try reports it applied, and waits for replicas
//     again), up to the pool's commit timeout.
//   - a resource-lease acquisition fails and is undone.
//   - an operator's action (Client.Cancel, RunNow, Resolve, Pause,
//     Resume, SetPartitions, RemoveSchedule, workflow.Cancel) fails with
//     an error matching ErrActionUnknown: it applied on the primary and
//     may or may not survive a failover.
//
// What it guarantees: a write acknowledged in durable mode is held by at
// least Replicas replicas, so a failover that promotes one of them (which
// Sentinel does when they are reachable and not lagging, and the old
// primary is down) keeps it. What it does not: Redis replication stays
// asynchronous and WAIT is not consensus. Sentinel may promote a replica
// that did not acknowledge (when those that did are down, or all replicas
// lag past its limits); a write that timed out may still exist; and a
// write is on a replica's memory, not its disk, unless AOF (WAITAOF) and
// the replica's own fsync policy say so. Loss detection (rewinds) stays the
// backstop. ARCHITECTURE.md, "Durable acknowledgements", has the details.
type Durability struct {
	// Replicas is how many replicas must acknowledge each write; 0 (the
	// default) acknowledges writes when the primary applied them.
	Replicas int
	// Timeout bounds each wait for replicas (default 1s; 0 is the default,
	// never "forever"). At most 80 % of the Redis client's read timeout
	// (go-redis's default: 5s), which the wait's reply is read under, and
	// of 5s with ContextTimeoutEnabled (ValidateClient).
	Timeout time.Duration
	// AOF waits with WAITAOF (the replicas also fsynced the writes to their
	// append-only file; needs appendonly on the replicas) where the server
	// has it (Redis 7.2 and later), with WAIT otherwise (detected once, and
	// logged at warn level).
	AOF bool
}

// DefaultRecentEnqueues is the default of Config.RecentEnqueues.
const DefaultRecentEnqueues = ledger.DefaultRecent

// Validate checks the configuration (the namespace's characters, a
// non-negative retention, the durability's numbers, Sentinel options that
// name a master and a Sentinel, no nil enqueue middleware).
func (c Config) Validate() error {
	if c.Retention < 0 || (c.Retention > 0 && c.Retention < time.Second) {
		return invalid("retention %v must be 0 (the default) or at least 1s", c.Retention)
	}
	for i, m := range c.EnqueueMiddleware {
		if m == nil {
			return invalid("EnqueueMiddleware %d is nil", i)
		}
	}
	if err := durable.Options(c.Durability).Validate(); err != nil {
		return invalid("%v", err)
	}
	if err := epoch.ValidateSentinel(c.Sentinel); err != nil {
		return invalid("%v", err)
	}
	return ValidateNamespace(c.WithDefaults().Namespace)
}

// configErr is what a constructor named fn records for every call to
// return: a nil Redis client (an interface, or a typed nil pointer in one),
// else c.Validate's error.
func configErr(fn string, rdb redis.UniversalClient, c Config) error {
	if rdb == nil {
		return invalid("%s was given a nil Redis client (want a *redis.Client, *redis.ClusterClient or failover client)", fn)
	}
	if v := reflect.ValueOf(rdb); v.Kind() == reflect.Pointer && v.IsNil() {
		return invalid("%s was given a nil %T (want a client from redis.NewClient, NewClusterClient or NewFailoverClient)", fn, rdb)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	return c.ValidateClient(rdb)
}

// ValidateClient checks the configuration against the Redis client it is
// used with: Durability.Timeout must end well within the client's read
// timeout (at most 80 % of it), which the wait's reply is read under
// (see Durability.Timeout).
// NewClient, NewInspector, worker.NewPool and asynqfence.New check it.
func (c Config) ValidateClient(rdb redis.UniversalClient) error {
	if err := durable.CheckClient(rdb, durable.Options(c.Durability)); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	l := c.ledger()
	c.Namespace, c.Retention, c.Logger = l.Namespace, l.Retention, l.Logger
	return c
}

func (c Config) ledger() ledger.Config {
	return ledger.Config{Namespace: c.Namespace, Retention: c.Retention, Sentinel: c.Sentinel, Logger: c.Logger,
		Durability: durable.Options(c.Durability)}.WithDefaults()
}

// recent is the ledger's record size for a client.
func (c Config) recent() int {
	switch {
	case c.RecentEnqueues < 0:
		return 0
	case c.RecentEnqueues == 0:
		return DefaultRecentEnqueues
	}
	return c.RecentEnqueues
}
