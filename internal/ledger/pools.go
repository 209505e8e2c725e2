package ledger

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"
)

// PoolInfo is what a running worker pool publishes about itself.
type PoolInfo struct {
	ID            string         `json:"id"`
	Host          string         `json:"host"`
	PID           int            `json:"pid"`
	Queues        map[string]int `json:"queues"`
	Concurrency   int            `json:"concurrency"`
	Busy          int            `json:"busy"`
	Version       string         `json:"version"`
	Started       time.Time      `json:"started"`
	LastHeartbeat time.Time      `json:"last_heartbeat"`
	// Kinds are the rules of the kinds the pool runs, by kind.
	Kinds map[string]KindRules `json:"kinds,omitempty"`
	// Clock is the pool's latest measurement of Redis's clock against its
	// own (zero before the first).
	Clock ClockSample `json:"clock,omitzero"`
	// ClockJumps counts the times the pool saw Redis's clock jump
	// backwards since it started.
	ClockJumps int64 `json:"clock_jumps,omitempty"`
}

// KindRules say what a kind's Go type does beyond its JSON: the checks a
// job enqueued without the type (raw JSON) would skip.
type KindRules struct {
	// Validate: the type checks its args (jobs.Validator).
	Validate bool `json:"validate,omitempty"`
	// Resource: the type names the resource it leases (jobs.Resourcer).
	Resource bool `json:"resource,omitempty"`
	// Sensitive: the type may hold fields shown redacted.
	Sensitive bool `json:"sensitive,omitempty"`
	// Limit: the type names a concurrency limit (jobs.Limiter).
	Limit bool `json:"limit,omitempty"`
	// Rate: the type names a rate limit (jobs.RateLimiter).
	Rate bool `json:"rate,omitempty"`
	// Group: the type names its fair group (jobs.Grouper).
	Group bool `json:"group,omitempty"`
	// Partition: the type names its partition key (jobs.Partitioner).
	Partition bool `json:"partition,omitempty"`
}

// Any reports whether the kind has any rule.
func (r KindRules) Any() bool {
	return r.Validate || r.Resource || r.Sensitive || r.Limit || r.Rate || r.Group || r.Partition
}

// Names lists the kind's rules, as the methods or fields that make them.
func (r KindRules) Names() []string {
	var n []string
	for _, x := range []struct {
		has  bool
		name string
	}{{r.Validate, "Validate"}, {r.Resource, "Resource"}, {r.Sensitive, "sensitive fields"},
		{r.Limit, "Limit"}, {r.Rate, "RateLimit"}, {r.Group, "Group"}, {r.Partition, "PartitionKey"}} {
		if x.has {
			n = append(n, x.name)
		}
	}
	return n
}

// ClockSample is one measurement of Redis's clock against the local one:
// a TIME call, its reply placed at the midpoint of the round trip.
type ClockSample struct {
	// At is the local time of the midpoint.
	At time.Time `json:"at"`
	// Redis is Redis's TIME reply.
	Redis time.Time `json:"redis"`
	// OffsetMS is Redis's clock minus the local one, in milliseconds
	// (positive: Redis is ahead), within ±RTTMS/2.
	OffsetMS float64 `json:"offset_ms"`
	// RTTMS is the round trip of the TIME call, in milliseconds.
	RTTMS float64 `json:"rtt_ms"`
}

// Offset returns OffsetMS as a duration.
func (c ClockSample) Offset() time.Duration {
	return time.Duration(c.OffsetMS * float64(time.Millisecond))
}

// Clock measures Redis's clock against the local one (one TIME call).
func (l *Ledger) Clock(ctx context.Context) (ClockSample, error) {
	sent := time.Now()
	t, err := l.rdb.Time(ctx).Result()
	if err != nil {
		return ClockSample{}, wrap("time", err)
	}
	rtt := time.Since(sent) // monotonic
	mid := sent.Add(rtt / 2)
	return ClockSample{At: mid, Redis: t, OffsetMS: ms64(t.Sub(mid)), RTTMS: ms64(rtt)}, nil
}

// ms64 is d in milliseconds, to the microsecond.
func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Heartbeat publishes p (LastHeartbeat is set here) for ttl: a pool that
// stops beating disappears from Pools after ttl.
func (l *Ledger) Heartbeat(ctx context.Context, p PoolInfo, ttl time.Duration) error {
	p.LastHeartbeat = time.Now()
	b, err := json.Marshal(p)
	if err != nil {
		return wrap("heartbeat", err)
	}
	pipe := l.rdb.Pipeline()
	pipe.Set(ctx, l.poolKey(p.ID), b, ttl)
	pipe.ZAdd(ctx, l.poolsKey(), redis.Z{Score: float64(p.LastHeartbeat.UnixMilli()), Member: p.ID})
	_, err = pipe.Exec(ctx)
	return wrap("heartbeat", err)
}

// Leave removes pool id from the list at once (a clean shutdown).
func (l *Ledger) Leave(ctx context.Context, id string) error {
	pipe := l.rdb.Pipeline()
	pipe.Del(ctx, l.poolKey(id))
	pipe.ZRem(ctx, l.poolsKey(), id)
	_, err := pipe.Exec(ctx)
	return wrap("leave", err)
}

// Pools returns the live pools, most recent heartbeat first. Entries of
// pools whose heartbeat lapsed are removed.
func (l *Ledger) Pools(ctx context.Context) ([]PoolInfo, error) {
	ids, err := l.rdb.ZRevRange(ctx, l.poolsKey(), 0, 999).Result()
	if err != nil {
		return nil, wrap("pools", err)
	}
	out := make([]PoolInfo, 0, len(ids))
	for _, id := range ids {
		b, err := l.rdb.Get(ctx, l.poolKey(id)).Bytes()
		if err == redis.Nil {
			l.rdb.ZRem(ctx, l.poolsKey(), id)
			continue
		}
		if err != nil {
			return nil, wrap("pools", err)
		}
		var p PoolInfo
		if json.Unmarshal(b, &p) != nil {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
