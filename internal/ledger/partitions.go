package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// Partitioned queues. A queue declared with P partitions (P > 1) is P
// ordinary queues, each in its own hash slot: partition k of queue q is the
// queue PartitionName(q, P, k), "q#k" or "q#k.s" (the '#' cannot appear in
// a queue name a caller gives, so a partition never collides with a
// queue). Every script stays a one-queue script: no script ever spans two
// partitions. The logical queue is an entry of the partition registry,
// the hash ns:partitions (queue → P), read by clients (to route enqueues)
// and pools (to claim from every partition); a queue without an entry has
// one partition, itself.
//
// Spreading: Redis Cluster gives each of M masters a contiguous range of
// the 16384 slots (redis-cli --cluster create: master i holds about
// [i·16384/M, (i+1)·16384/M)). Partition k of P is named so that its slot
// lies in the middle half of the k-th of P equal slot ranges
// [k·16384/P, (k+1)·16384/P) (the middle half, so that the few slots by
// which tools round the masters' ranges differently never matter): "q#k"
// when its slot is there already, else "q#k.s" for the smallest s ≥ 1 that
// puts it there. So P = M, or any multiple of M, puts the same number of
// partitions on each master (3 on 3 masters: one each; 6 or 12 on 3 or 6
// masters: 2 or 4 each, or 1 or 2 each), and P = 3 on 6 masters uses three
// of them, one partition each. Other P spread as evenly as contiguous
// ranges allow. Clusters whose slots were moved by hand get whatever slots
// the names hash to.

// MaxPartitions bounds a queue's partitions.
const MaxPartitions = 64

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// partitionSep separates a queue's name from its partition's suffix.
const partitionSep = '#'

var partitionNames sync.Map // [2]any{q, p} → []string

// PartitionNames returns the queue names of queue q's p partitions (p ≤ 1:
// q itself), in partition order.
func PartitionNames(q string, p int) []string {
	if p <= 1 {
		return []string{q}
	}
	key := q + "\x00" + strconv.Itoa(p)
	if v, ok := partitionNames.Load(key); ok {
		return v.([]string)
	}
	out := make([]string, p)
	for k := range p {
		lo, hi := k*clusterSlots/p, (k+1)*clusterSlots/p
		lo, hi = lo+(hi-lo)/4, hi-(hi-lo)/4 // the middle half: robust to how a tool rounds the masters' ranges
		base := q + string(partitionSep) + strconv.Itoa(k)
		name := base
		for s := 1; ; s++ {
			if slot := Slot(name); slot >= lo && slot < hi {
				break
			}
			name = base + "." + strconv.Itoa(s)
		}
		out[k] = name
	}
	partitionNames.Store(key, out)
	return out
}

// Logical returns the queue a queue name belongs to: q for q and for every
// partition of q.
func Logical(name string) string {
	if i := strings.IndexByte(name, partitionSep); i >= 0 {
		return name[:i]
	}
	return name
}

// IsPartition reports whether name is a partition's queue name.
func IsPartition(name string) bool { return strings.IndexByte(name, partitionSep) >= 0 }

// ValidateQueueRef checks a name that may be a queue or one of its
// partitions ("q#k" or "q#k.s").
func ValidateQueueRef(name string) error {
	i := strings.IndexByte(name, partitionSep)
	if i < 0 {
		return ValidateQueue(name)
	}
	k, s, dotted := strings.Cut(name[i+1:], ".")
	if ValidateQueue(name[:i]) != nil || !digits(k) || (dotted && !digits(s)) {
		return invalid("partition name %q must be <queue>#<k> or <queue>#<k>.<s> (a valid queue name, then digits)", Clip(name))
	}
	return nil
}

func digits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RoutePartition picks the partition (0 ≤ k < p) of a job: by its
// partition key when given, else by its operation id when given, else
// spread (the caller's counter n). The same key or operation id always
// picks the same partition of a layout.
func RoutePartition(p int, key, op string, n uint64) int {
	if p <= 1 {
		return 0
	}
	if key == "" {
		key = op
	}
	if key == "" {
		return int(n % uint64(p))
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(p))
}

func (l *Ledger) partitionsKey() string { return l.cfg.Namespace + ":partitions" }

// Partitions returns the partition registry: queue → P, for every queue
// declared with partitions.
func (l *Ledger) Partitions(ctx context.Context) (map[string]int, error) {
	h, err := l.rdb.HGetAll(ctx, l.partitionsKey()).Result()
	if err != nil {
		return nil, wrap("partitions", err)
	}
	out := make(map[string]int, len(h))
	for q, v := range h {
		if p, err := strconv.Atoi(v); err == nil && p > 1 {
			out[q] = p
		}
	}
	return out, nil
}

// PartitionsOf returns the registered partition counts of qs (1 for a
// queue without an entry), in the order of qs.
func (l *Ledger) PartitionsOf(ctx context.Context, qs ...string) ([]int, error) {
	out := make([]int, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	vs, err := l.rdb.HMGet(ctx, l.partitionsKey(), qs...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("partitions", err)
	}
	for i := range qs {
		out[i] = 1
		if i < len(vs) {
			if s, ok := vs[i].(string); ok {
				if p, err := strconv.Atoi(s); err == nil && p > 1 {
					out[i] = p
				}
			}
		}
	}
	return out, nil
}

// MaxLayoutChanges bounds the layout changes kept per queue (the newest).
const MaxLayoutChanges = 50

// PartitionChange is one change of a queue's partition count, recorded
// with it.
type PartitionChange struct {
	// At is when it was made, by Redis's clock.
	At time.Time `json:"at"`
	// Actor is who made it (operator:<name>) and Note why.
	Actor string `json:"actor"`
	Note  string `json:"note,omitempty"`
	// From and To are the partition counts before and after (1: none).
	From int `json:"from"`
	To   int `json:"to"`
}

// setPartitionsScript sets a queue's entry in the registry (KEYS 1) and,
// when the count changes, records who changed it and why (KEYS 2, newest
// first, capped). ARGV: queue, count, actor, note, cap. Reply: the
// previous count. A key of another type fails it before its first write
// (ErrForeignKey).
var setPartitionsScript = luafunc.NewPlain(keyGuardLua + `
key_guard(KEYS[1], 'hash', KEYS[2], 'list')
local prev = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '1') or 1
if prev < 1 then prev = 1 end
local p = tonumber(ARGV[2])
if p == prev then return prev end
if p <= 1 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
redis.call('LPUSH', KEYS[2], cjson.encode({at = string.format('%d', now), actor = ARGV[3], note = ARGV[4],
  from = prev, to = p}))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[5]) - 1)
return prev
`)

// SetPartitions records queue q's partition count p (1: no partitions,
// the entry is removed), with who changed it and why (actor, note: see
// PartitionChanges), and registers the new partitions in the queue
// registry, so every reader lists them before their first job. It returns
// the previous count. Jobs already in the previous layout's partitions
// stay where they are (pools serve every partition of q the queue registry
// lists: they drain).
func (l *Ledger) SetPartitions(ctx context.Context, q string, p int, actor, note string) (int, error) {
	v, err := l.durableWrite(ctx, setPartitionsScript, []string{l.partitionsKey(), l.partitionChangesKey(q)},
		q, p, actor, note, MaxLayoutChanges)
	v, ack, err := unacked(v, err)
	prev, ok := v.(int64)
	if err == nil && !ok {
		err = fmt.Errorf("%w: set partitions: reply is %T, not an integer", ErrReply, v)
	}
	if err != nil {
		return 0, wrap("set partitions of "+q, err)
	}
	if err := l.RegisterQueues(ctx, PartitionNames(q, p)...); err != nil {
		return int(prev), err
	}
	return int(prev), actionErr("set partitions of "+q, ack)
}

// PartitionChanges returns queue q's recorded layout changes, newest
// first (at most MaxLayoutChanges).
func (l *Ledger) PartitionChanges(ctx context.Context, q string) ([]PartitionChange, error) {
	raw, err := l.rdb.LRange(ctx, l.partitionChangesKey(q), 0, MaxLayoutChanges-1).Result()
	if err != nil {
		return nil, wrap("partition changes of "+q, err)
	}
	return partitionChangesFrom(raw), nil
}

// partitionChangesFrom decodes a layout changes list.
func partitionChangesFrom(raw []string) []PartitionChange {
	out := make([]PartitionChange, 0, len(raw))
	for _, s := range raw {
		var e struct {
			At, Actor, Note string
			From, To        int
		}
		if json.Unmarshal([]byte(s), &e) != nil {
			continue
		}
		out = append(out, PartitionChange{At: msTime(e.At), Actor: e.Actor, Note: e.Note, From: e.From, To: e.To})
	}
	return out
}

// Physical returns the queue names holding logical queue q's jobs: the
// partitions of its registered layout (p, from the registry) and every
// other partition of q, or q itself, found in the queue registry qs (an
// earlier layout still draining, or kept for its finished jobs), sorted.
func Physical(q string, p int, qs []string) []string {
	set := map[string]struct{}{}
	for _, n := range PartitionNames(q, p) {
		set[n] = struct{}{}
	}
	for _, n := range qs {
		if n == q || (IsPartition(n) && Logical(n) == q) {
			set[n] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Master returns the address of the Redis server holding queue name's
// keys (on a Cluster, the master of its slot).
func (l *Ledger) Master(ctx context.Context, name string) (string, error) {
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, l.prefix(name)+"pending")
		if err != nil {
			return "", wrap("master of "+name, err)
		}
		return m.Options().Addr, nil
	case *redis.Client:
		return c.Options().Addr, nil
	}
	return "", nil
}

// Slot returns the Redis Cluster hash slot of the keys of queue name (the
// CRC16 of the hash tag {name}, modulo 16384).
func Slot(name string) int { return int(crc16(name) % clusterSlots) }

// crc16 is CRC-16/XMODEM, Redis Cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
