package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// PoolInfo is what a running worker pool publishes about itself.
type PoolInfo struct {
	ID string `json:"id"`
	// Instance is a random nonce of the pool (one per worker.Pool value):
	// two live heartbeats of one ID with different instances are two
	// pools sharing the ID.
	Instance      string         `json:"instance,omitempty"`
	Host          string         `json:"host"`
	PID           int            `json:"pid"`
	Queues        map[string]int `json:"queues"`
	Concurrency   int            `json:"concurrency"`
	Busy          int            `json:"busy"`
	Version       string         `json:"version"`
	Started       time.Time      `json:"started"`
	LastHeartbeat time.Time      `json:"last_heartbeat"`
	// Schedules are the ids of the periodic schedules the pool ticks when
	// it leads (none with periodic jobs disabled).
	Schedules []string `json:"schedules,omitempty"`
	// ScheduleDigests are the digests of the pool's definitions of those
	// schedules (ScheduleSpec.Digest), by schedule id: a schedule's
	// conflict lasts while a live pool reports the losing digest.
	ScheduleDigests map[string]string `json:"schedule_digests,omitempty"`
	// Kinds are the rules of the kinds the pool runs, by kind.
	Kinds map[string]KindRules `json:"kinds,omitempty"`
	// Reconcilers are the kinds the pool runs whose worker has a Reconcile
	// (jobs.Reconciler): a maintenance leader without one leaves their
	// uncertain jobs to a leader that has it.
	Reconcilers []string `json:"reconcilers,omitempty"`
	// Clock is the pool's latest measurement of Redis's clock against its
	// own (zero before the first).
	Clock ClockSample `json:"clock,omitzero"`
	// ClockJumps counts the times the pool saw Redis's clock jump
	// backwards since it started.
	ClockJumps int64 `json:"clock_jumps,omitempty"`
	// ReplicasMissing is how many more replicas the pool's
	// Durability.Replicas (ReplicasRequired) requires than Redis had
	// online at the pool's last check (the largest shortfall of a
	// Cluster's masters); 0 when enough were. While above 0, the pool's
	// durable claims, completions and enqueues fail.
	ReplicasMissing  int `json:"replicas_missing,omitempty"`
	ReplicasRequired int `json:"replicas_required,omitempty"`
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
	// Node is the address of the master measured, and Slots the first
	// range of hash slots it serves ("0-5460"), on a Redis Cluster only:
	// its masters' clocks differ, so each is measured, and a master's
	// successor after a failover serves the same slots.
	Node  string `json:"node,omitempty"`
	Slots string `json:"slots,omitempty"`
}

// Offset returns OffsetMS as a duration.
func (c ClockSample) Offset() time.Duration {
	return time.Duration(c.OffsetMS * float64(time.Millisecond))
}

// Clock measures Redis's clock against the local one (one TIME call); on
// a Redis Cluster, the clock of every master, returning the one farthest
// from the local clock (see Clocks).
func (l *Ledger) Clock(ctx context.Context) (ClockSample, error) {
	ss, err := l.Clocks(ctx)
	if err != nil {
		return ClockSample{}, err
	}
	return Farthest(ss), nil
}

// Farthest returns the sample of ss farthest from the local clock (the
// zero sample when ss is empty).
func Farthest(ss []ClockSample) ClockSample {
	var far ClockSample
	for i, s := range ss {
		if i == 0 || math.Abs(s.OffsetMS) > math.Abs(far.OffsetMS) {
			far = s
		}
	}
	return far
}

// Clocks measures Redis's clock against the local one: one sample (one
// TIME call) on a single server or a failover client; on a Redis Cluster,
// one per master (a keyless TIME would meet a random master each time, and
// masters' clocks differ), each naming the master and its first slot
// range, in slot order.
func (l *Ledger) Clocks(ctx context.Context) ([]ClockSample, error) {
	cc, ok := l.rdb.(*redis.ClusterClient)
	if !ok {
		s, err := clockOf(ctx, l.rdb)
		if err != nil {
			return nil, err
		}
		return []ClockSample{s}, nil
	}
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every version.
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, wrap("time", err)
	}
	first := map[string]int{} // master address -> its lowest slot
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		if lo, ok := first[r.Nodes[0].Addr]; !ok || r.Start < lo {
			first[r.Nodes[0].Addr] = r.Start
		}
	}
	ranges := map[int]string{}
	for _, r := range slots {
		if len(r.Nodes) > 0 && first[r.Nodes[0].Addr] == r.Start {
			ranges[r.Start] = strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
		}
	}
	var mu sync.Mutex
	var out []ClockSample
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		s, err := clockOf(ctx, m)
		if err != nil {
			return err
		}
		s.Node = m.Options().Addr
		if lo, ok := first[s.Node]; ok {
			s.Slots = ranges[lo]
		} else {
			s.Slots = s.Node // a master serving no slot
		}
		mu.Lock()
		out = append(out, s)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		a, aok := first[out[i].Node]
		b, bok := first[out[j].Node]
		if aok != bok {
			return aok
		}
		return a < b || a == b && out[i].Node < out[j].Node
	})
	return out, nil
}

// clockOf measures rdb's clock (one TIME call).
func clockOf(ctx context.Context, rdb redis.Cmdable) (ClockSample, error) {
	sent := time.Now()
	t, err := rdb.Time(ctx).Result()
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
// stops beating disappears from Pools after ttl. Each heartbeat also drops
// from the pools index the entries of pools that have not beaten for twice
// ttl (a pool killed without leaving), so the index holds the live pools
// whether or not anyone reads Pools; a live pool whose clock is that far
// behind is listed again by its next heartbeat.
func (l *Ledger) Heartbeat(ctx context.Context, p PoolInfo, ttl time.Duration) error {
	_, err := l.Beat(ctx, p, ttl)
	return err
}

// Beat is Heartbeat, and returns the heartbeat it replaced when that was
// another instance's (PoolInfo.Instance): another live pool publishes
// under p.ID (nil when none did).
func (l *Ledger) Beat(ctx context.Context, p PoolInfo, ttl time.Duration) (*PoolInfo, error) {
	p.LastHeartbeat = time.Now()
	b, err := json.Marshal(p)
	if err != nil {
		return nil, wrap("heartbeat", err)
	}
	lapsed := p.LastHeartbeat.Add(-2 * ttl).UnixMilli()
	pipe := l.rdb.Pipeline()
	prev := pipe.Get(ctx, l.poolKey(p.ID))
	pipe.Set(ctx, l.poolKey(p.ID), b, ttl)
	pipe.ZAdd(ctx, l.poolsKey(), redis.Z{Score: float64(p.LastHeartbeat.UnixMilli()), Member: p.ID})
	pipe.ZRemRangeByScore(ctx, l.poolsKey(), "-inf", "("+strconv.FormatInt(lapsed, 10))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("heartbeat", err)
	}
	return otherInstance(prev.Val(), p), nil
}

// Join publishes p's heartbeat, as a starting pool's first, unless a live
// heartbeat of another instance holds p.ID: then it writes nothing and
// returns that heartbeat and how long before it lapses.
func (l *Ledger) Join(ctx context.Context, p PoolInfo, ttl time.Duration) (*PoolInfo, time.Duration, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, 0, wrap("join", err)
	}
	set, err := l.rdb.SetNX(ctx, l.poolKey(p.ID), b, ttl).Result()
	if err != nil {
		return nil, 0, wrap("join", err)
	}
	if !set {
		pipe := l.rdb.Pipeline()
		cur := pipe.Get(ctx, l.poolKey(p.ID))
		left := pipe.PTTL(ctx, l.poolKey(p.ID))
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, 0, wrap("join", err)
		}
		if o := otherInstance(cur.Val(), p); o != nil {
			return o, max(0, left.Val()), nil
		}
	}
	return nil, 0, l.Heartbeat(ctx, p, ttl)
}

// HeartbeatOf returns pool id's current heartbeat (nil: none).
func (l *Ledger) HeartbeatOf(ctx context.Context, id string) (*PoolInfo, error) {
	b, err := l.rdb.Get(ctx, l.poolKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("heartbeat of "+id, err)
	}
	var p PoolInfo
	if err := json.Unmarshal([]byte(b), &p); err != nil {
		return nil, wrap("heartbeat of "+id, err)
	}
	return &p, nil
}

// otherInstance decodes heartbeat b ("": none) when it is another
// instance's than p's.
func otherInstance(b string, p PoolInfo) *PoolInfo {
	if b == "" {
		return nil
	}
	var o PoolInfo
	if json.Unmarshal([]byte(b), &o) != nil || o.Instance == p.Instance {
		return nil
	}
	return &o
}

// Leave removes pool id from the list at once (a clean shutdown).
func (l *Ledger) Leave(ctx context.Context, id string) error {
	pipe := l.rdb.Pipeline()
	pipe.Del(ctx, l.poolKey(id))
	pipe.ZRem(ctx, l.poolsKey(), id)
	_, err := pipe.Exec(ctx)
	return wrap("leave", err)
}

// LeaveAs is Leave for the pool instance instance only: its heartbeat is
// deleted only while it is that instance's (another live pool's, sharing
// the ID, stays), and the list entry only when the heartbeat was the
// instance's or is gone. It undoes the heartbeat of a start cut short.
func (l *Ledger) LeaveAs(ctx context.Context, id, instance string) error {
	left, err := leaveAsScript.Run(ctx, l.rdb, []string{l.poolKey(id)}, instance).Int()
	if err != nil {
		return wrap("leave", err)
	}
	if left == 0 {
		return nil
	}
	return wrap("leave", l.rdb.ZRem(ctx, l.poolsKey(), id).Err())
}

// leaveAsScript deletes KEYS[1], a pool's heartbeat, when it is instance
// ARGV[1]'s; it returns 1 when it did or the key is gone, else 0.
var leaveAsScript = luafunc.NewPlain(`
local v = redis.call('GET', KEYS[1])
if not v then return 1 end
local ok, hb = pcall(cjson.decode, v)
if not ok or type(hb) ~= 'table' or hb.instance ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`)

// Pools returns the live pools, most recent heartbeat first. Entries of
// pools whose heartbeat lapsed are skipped (a heartbeat removes them).
func (l *Ledger) Pools(ctx context.Context) ([]PoolInfo, error) {
	ids, err := l.rdb.ZRevRange(ctx, l.poolsKey(), 0, 999).Result()
	if err != nil {
		return nil, wrap("pools", err)
	}
	out := make([]PoolInfo, 0, len(ids))
	for _, id := range ids {
		b, err := l.rdb.Get(ctx, l.poolKey(id)).Bytes()
		if err == redis.Nil { // gone; the next heartbeat drops its entry
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
