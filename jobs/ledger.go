package jobs

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// Config is shared by the Client and the Ledger. The zero value is usable.
type Config struct {
	// Namespace prefixes every ledger key and every asynq queue name
	// (default "fq"), so tenants and tests sharing a Redis never collide.
	Namespace string
	// Retention is how long succeeded and dead jobs (and their operation
	// ids, which deduplicate enqueues) are kept (default 7 days).
	Retention time.Duration
	// Registerer receives the client's metrics (enqueued, deduplicated at
	// enqueue, rejected as invalid); default: none are exported.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = "fq"
	}
	if c.Retention <= 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	return c
}

// Ledger is the source of truth for every job's state. Each transition is
// one Lua script that checks the caller's token; every script touches only
// the keys of one queue, hash-tagged {<queue>}, so it runs on Redis Cluster.
//
// Keys, for namespace ns and queue q:
//
//	ns:{q}:job:<id>          hash: the job (see Record)
//	ns:{q}:job:<id>:history  list: JSON history entries (see Entry)
//	ns:{q}:op:<operation>    string: the job id owning the operation id
//	ns:{q}:<state>           sorted set per state (running: by lease deadline)
//	ns:{q}:stats             hash: counters (enqueued, succeeded, fenced_commit, ...)
//	ns:{q}:events            list: recent fenced rejections and deduplications
//	ns:{q}:reconciler        string: highest reconciler leader token seen
//	ns:queues                set: queue names (the only key outside a queue's slot)
type Ledger struct {
	rdb   redis.UniversalClient
	cfg   Config
	batch *scriptbatch.Batcher
}

// NewLedger returns a Ledger over rdb.
func NewLedger(rdb redis.UniversalClient, cfg Config) *Ledger {
	return &Ledger{rdb: rdb, cfg: cfg.withDefaults(), batch: scriptbatch.New(rdb)}
}

// run executes a transition script; concurrent transitions (a pool's
// workers claiming, renewing and committing) share pipelines.
func (l *Ledger) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return l.batch.Run(ctx, script, keys, args...)
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

// AsynqQueue returns the asynq queue name that carries queue q's deliveries.
func (l *Ledger) AsynqQueue(q string) string { return l.cfg.Namespace + "/" + q }

func (l *Ledger) prefix(q string) string { return l.cfg.Namespace + ":{" + q + "}:" }

// QueuesKey is the set of known queue names.
func (l *Ledger) QueuesKey() string { return l.cfg.Namespace + ":queues" }

// JobKey returns the key of job id's hash.
func (l *Ledger) JobKey(q, id string) string { return l.prefix(q) + "job:" + id }

// StateKey returns the key of state s's index for queue q.
func (l *Ledger) StateKey(q string, s State) string { return l.prefix(q) + string(s) }

func (l *Ledger) opKey(q, op string) string { return l.prefix(q) + "op:" + op }

// keys builds the KEYS layout every ledger script shares (see prelude.lua).
func (l *Ledger) keys(q, id, op string) []string {
	p := l.prefix(q)
	return []string{
		p + "job:" + id, p + "job:" + id + ":history", p + "op:" + op,
		p + "pending", p + "running", p + "uncertain",
		p + "review", p + "succeeded", p + "dead",
		p + "stats", p + "events", p + "reconciler",
	}
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
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/expire.lua
	expireSrc string
	//go:embed lua/resolve.lua
	resolveSrc string
	//go:embed lua/lead.lua
	leadSrc string

	enqueueScript = redis.NewScript(prelude + enqueueSrc)
	claimScript   = redis.NewScript(prelude + claimSrc)
	renewScript   = redis.NewScript(prelude + renewSrc)
	commitScript  = redis.NewScript(prelude + commitSrc)
	expireScript  = redis.NewScript(prelude + expireSrc)
	resolveScript = redis.NewScript(prelude + resolveSrc)
	leadScript    = redis.NewScript(prelude + leadSrc)
)

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return fmt.Sprint(x)
	}
	return fmt.Sprint(v)
}
