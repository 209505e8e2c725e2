package jobs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	// Registerer receives the client's metrics (enqueued, deduplicated at
	// enqueue, rejected as invalid); default: none are exported.
	Registerer prometheus.Registerer
	// EnqueueMiddleware wraps every enqueue call of a Client built from
	// this Config, the first outermost (see EnqueueMiddleware). A pool
	// built from it (worker.Config.Jobs) applies it to the jobs its
	// maintenance leader enqueues: periodic ticks and outbox relays.
	EnqueueMiddleware []EnqueueMiddleware
}

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
	c.Namespace, c.Retention = l.Namespace, l.Retention
	return c
}

func (c Config) ledger() ledger.Config {
	return ledger.Config{Namespace: c.Namespace, Retention: c.Retention}.WithDefaults()
}
