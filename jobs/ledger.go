package jobs

import (
	"context"
	_ "embed"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// DefaultNamespace is the key prefix used when none is given.
const DefaultNamespace = "fq"

// DefaultRetention is how long finished jobs are kept when no Retention is given.
const DefaultRetention = 7 * 24 * time.Hour

// Config is shared by the Client and the Ledger. The zero value is usable.
type Config struct {
	// Namespace prefixes every key (default DefaultNamespace), so tenants
	// and tests sharing a Redis never collide.
	Namespace string
	// Retention is how long succeeded, dead and cancelled jobs (and their
	// operation ids, which deduplicate enqueues) are kept (default
	// DefaultRetention).
	Retention time.Duration
	// Registerer receives the client's metrics (enqueued, deduplicated at
	// enqueue, rejected as invalid); default: none are exported.
	Registerer prometheus.Registerer
}

// Validate checks the configuration (the namespace's characters).
func (c Config) Validate() error { return ValidateNamespace(c.withDefaults().Namespace) }

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	return c
}

// Ledger is the queue and the source of truth for every job's state. Each
// transition is one Lua script that checks the caller's token; every script
// touches only the keys of one queue, hash-tagged {<queue>}, so it runs on
// Redis Cluster. ARCHITECTURE.md describes the layout and every script.
//
// Keys, for namespace ns and queue q:
//
//	ns:{q}:job:<id>          hash: the job (see Record)
//	ns:{q}:job:<id>:history  list: JSON history entries beyond the common path (see Entry)
//	ns:{q}:op:<operation>    string: the job id owning a caller-given operation id
//	ns:{q}:pending           sorted set by due time: the queue itself
//	ns:{q}:running           sorted set by lease deadline
//	ns:{q}:<state>           sorted set per other state (uncertain: by next look)
//	ns:{q}:stats             hash: counters (enqueued, succeeded, fenced_commit, ...)
//	ns:{q}:events            list: recent fenced rejections, deduplications, operator actions
//	ns:{q}:reconciler        string: highest reconciler leader token seen
//	ns:{q}:paused            string: present while the queue is paused (who, why)
//	ns:{q}:idle              string: a claim found nothing; the next enqueue publishes
//	ns:{q}:notify            pub/sub channel: wake-ups for idle pools
//	ns:queues                set: queue names (outside every queue's slot)
//	ns:reconciler:status     hash: what the acting reconciler last published
type Ledger struct {
	rdb   redis.UniversalClient
	cfg   Config
	batch *scriptbatch.Batcher
}

// NewLedger returns a Ledger over rdb.
func NewLedger(rdb redis.UniversalClient, cfg Config) *Ledger {
	return &Ledger{rdb: rdb, cfg: cfg.withDefaults(), batch: scriptbatch.New(rdb)}
}

// run executes a ledger script; concurrent calls (a pool's claims, renewals
// and completions, enqueues from many goroutines) share pipelines.
func (l *Ledger) run(ctx context.Context, script *redis.Script, q string, args ...any) *redis.Cmd {
	return l.batch.Run(ctx, script, l.keys(q), append([]any{l.prefix(q)}, args...)...)
}

// Namespace returns the key prefix in use.
func (l *Ledger) Namespace() string { return l.cfg.Namespace }

// Retention returns how long finished jobs are kept.
func (l *Ledger) Retention() time.Duration { return l.cfg.Retention }

// Redis returns the client the ledger uses.
func (l *Ledger) Redis() redis.UniversalClient { return l.rdb }

var queueName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,100}$`)

// ValidateQueue checks a queue name: 1-100 of letters, digits and ._:-
func ValidateQueue(q string) error {
	if !queueName.MatchString(q) {
		return invalid("queue name %q must be 1-100 letters, digits or ._:-", q)
	}
	return nil
}

func (l *Ledger) prefix(q string) string { return l.cfg.Namespace + ":{" + q + "}:" }

func (l *Ledger) queuesKey() string { return l.cfg.Namespace + ":queues" }

// JobKey returns the key of job id's hash (for memory accounting and tools;
// read jobs through Get).
func (l *Ledger) JobKey(q, id string) string { return l.prefix(q) + "job:" + id }

// StateKey returns the key of state s's index for queue q.
func (l *Ledger) StateKey(q string, s State) string { return l.prefix(q) + string(s) }

func (l *Ledger) statusKey() string { return l.cfg.Namespace + ":reconciler:status" }

func (l *Ledger) opKey(q, op string) string { return l.prefix(q) + "op:" + op }

// OperationKey returns the key that maps caller-given operation id op of
// queue q to its job id (for tools that search operation ids by prefix;
// look jobs up with FindByOperation).
func (l *Ledger) OperationKey(q, op string) string { return l.opKey(q, op) }

// NotifyChannel is the pub/sub channel on which queue q's idle pools are
// woken when a job becomes due.
func (l *Ledger) NotifyChannel(q string) string { return l.prefix(q) + "notify" }

// keys builds the KEYS layout every ledger script shares (see prelude.lua).
func (l *Ledger) keys(q string) []string {
	p := l.prefix(q)
	return []string{
		p + "pending", p + "running", p + "uncertain", p + "review",
		p + "succeeded", p + "dead", p + "cancelled",
		p + "stats", p + "events", p + "reconciler", p + "paused", p + "idle",
	}
}

// RegisterQueues adds queue names to the namespace's queue registry, which
// the reconciler, the dashboard and the CLI read. Pools call it as they run
// and clients when a queue's counters were empty, so the registry heals
// after Redis lost its keys.
func (l *Ledger) RegisterQueues(ctx context.Context, qs ...string) error {
	if len(qs) == 0 {
		return nil
	}
	members := make([]any, len(qs))
	for i, q := range qs {
		members[i] = q
	}
	if err := l.rdb.SAdd(ctx, l.queuesKey(), members...).Err(); err != nil {
		return wrap("register queues", err)
	}
	return nil
}

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/enqueue.lua
	enqueueSrc string
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/renew.lua
	renewSrc string
	//go:embed lua/complete.lua
	completeSrc string
	//go:embed lua/expire.lua
	expireSrc string
	//go:embed lua/resolve.lua
	resolveSrc string
	//go:embed lua/lead.lua
	leadSrc string
	//go:embed lua/cancel.lua
	cancelSrc string
	//go:embed lua/pause.lua
	pauseSrc string
	//go:embed lua/run_now.lua
	runNowSrc string
	//go:embed lua/bridge_claim.lua
	bridgeClaimSrc string

	enqueueScript  = redis.NewScript(prelude + enqueueSrc)
	claimScript    = redis.NewScript(prelude + claimSrc)
	renewScript    = redis.NewScript(prelude + renewSrc)
	completeScript = redis.NewScript(prelude + completeSrc)
	expireScript   = redis.NewScript(prelude + expireSrc)
	resolveScript  = redis.NewScript(prelude + resolveSrc)
	leadScript     = redis.NewScript(prelude + leadSrc)
	cancelScript   = redis.NewScript(prelude + cancelSrc)
	pauseScript    = redis.NewScript(prelude + pauseSrc)
	runNowScript   = redis.NewScript(prelude + runNowSrc)

	bridgeClaimScript = redis.NewScript(prelude + bridgeClaimSrc)
)

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
