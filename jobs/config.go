package jobs

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

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
	// DefaultRetention; at least a second).
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
	// this Config, the first outermost (see EnqueueMiddleware). A pool
	// built from it (worker.Config.Jobs) applies it to the jobs its
	// maintenance leader enqueues: periodic ticks and outbox relays.
	EnqueueMiddleware []EnqueueMiddleware
	// Logger receives the client's logs (a detected ledger rewind, the
	// fencing epoch of a new primary); default slog.Default(). A pool logs
	// to its own worker.Config.Logger.
	Logger *slog.Logger
	// RecentEnqueues is how many of its latest acknowledged enqueues the
	// client records, so that after a detected ledger rewind it can
	// re-submit those Redis lost (Client.Resubmit); default
	// DefaultRecentEnqueues, negative: none. The record holds each job's
	// payload: budget about its size times RecentEnqueues of memory.
	RecentEnqueues int
	// ResubmitOnRewind makes the client re-submit its recorded enqueues
	// (Client.Resubmit, in the background) as soon as it detects a rewind.
	ResubmitOnRewind bool
}

// DefaultRecentEnqueues is the default of Config.RecentEnqueues.
const DefaultRecentEnqueues = ledger.DefaultRecent

// Validate checks the configuration (the namespace's characters, a
// non-negative retention).
func (c Config) Validate() error {
	if c.Retention < 0 || (c.Retention > 0 && c.Retention < time.Second) {
		return invalid("retention %v must be 0 (the default) or at least 1s", c.Retention)
	}
	return ValidateNamespace(c.WithDefaults().Namespace)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	l := c.ledger()
	c.Namespace, c.Retention, c.Logger = l.Namespace, l.Retention, l.Logger
	return c
}

func (c Config) ledger() ledger.Config {
	return ledger.Config{Namespace: c.Namespace, Retention: c.Retention, Sentinel: c.Sentinel, Logger: c.Logger}.WithDefaults()
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
