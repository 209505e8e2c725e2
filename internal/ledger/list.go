package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/lease"
)

// Bounds on filtered lists and prefix searches.
const (
	// MaxKindScan bounds how many index entries a kind filter reads per
	// queue and call; beyond it totals are lower bounds.
	MaxKindScan = 20_000
	// kindChunk is how many index entries a kind filter reads at once.
	kindChunk = 500
	// MaxPrefixMatches bounds the jobs a prefix search returns.
	MaxPrefixMatches = 20
	// maxScanCalls and scanCount bound the SCAN calls of a prefix search.
	maxScanCalls = 50
	scanCount    = 1000
)

// Filter selects entries of one state index.
type Filter struct {
	State    State
	Kind     string    // "": any kind
	From, To time.Time // on the index's time; zero: unbounded
	Desc     bool      // newest first
}

// Indexed is one entry of a state index.
type Indexed struct {
	Queue, ID string
	Score     float64 // the index score, unix milliseconds
}

func (f Filter) scoreRange() (lo, hi string) {
	lo, hi = "-inf", "+inf"
	if !f.From.IsZero() {
		lo = strconv.FormatInt(f.From.UnixMilli(), 10)
	}
	if !f.To.IsZero() {
		hi = strconv.FormatInt(f.To.UnixMilli(), 10)
	}
	return lo, hi
}

// Match returns the first need entries of each of queues qs that pass f,
// merged in f's order and cut to need, with the number of entries that pass
// (exact unless a kind filter hit MaxKindScan or a queue's side indexes
// were cut). It counts every queue's entries in range in a fixed number of
// round trips, then reads only the index keys holding some. Queues whose
// reads failed are left out, and named by a *PartialError (Page likewise).
func (l *Ledger) Match(ctx context.Context, qs []string, f Filter, need int) ([]Indexed, int64, bool, error) {
	var p Partial
	full, all, err := l.holding(ctx, qs, f)
	if !p.Add(err) {
		return nil, 0, false, err
	}
	items, total, exact, err := l.matchKeys(ctx, full, f, need)
	if !p.Add(err) {
		return nil, 0, false, err
	}
	return items, total, all && exact, p.Err()
}

// indexKey is one index key of a queue.
type indexKey struct{ q, key string }

// holding returns the index keys of queues qs (f's state index and, for
// pending, the side indexes) holding an entry in f's score range, in qs'
// order, in one round trip (two for pending) whatever the number of
// queues; all is false when a queue's side indexes were cut. Queues
// whose reads failed are left out, and named by a *PartialError.
func (l *Ledger) holding(ctx context.Context, qs []string, f Filter) (full []indexKey, all bool, err error) {
	all = true
	var side [][]string
	var p Partial
	if f.State == Pending {
		// every queue's side indexes in one round trip
		if side, all, err = l.pendingSideKeysOf(ctx, qs); !p.Add(err) {
			return nil, false, err
		}
	}
	var idx []indexKey
	for i, q := range qs {
		if p.Missed(q) {
			continue
		}
		idx = append(idx, indexKey{q, l.StateKey(q, f.State)})
		if side != nil {
			for _, k := range side[i] {
				idx = append(idx, indexKey{q, k})
			}
		}
	}
	if len(idx) == 0 {
		return nil, all, p.Err()
	}
	lo, hi := f.scoreRange()
	pipe := l.rdb.Pipeline()
	counts := make([]*redis.IntCmd, len(idx))
	for i, x := range idx {
		counts[i] = pipe.ZCount(ctx, x.key, lo, hi)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	names := make([]string, len(idx))
	errs := make([]error, len(idx))
	for i, x := range idx {
		names[i], errs[i] = x.q, wrap("count "+string(f.State)+" of "+x.q, counts[i].Err())
	}
	if err := partialOf(ctx, names, errs); !p.Add(err) {
		return nil, false, err
	}
	for i, x := range idx {
		if counts[i].Val() > 0 && !p.Missed(x.q) {
			full = append(full, x)
		}
	}
	if len(full) == 0 && len(p.e.Unreachable) == len(slices.Compact(slices.Sorted(slices.Values(qs)))) {
		return nil, false, p.e.Err // nothing read
	}
	return full, all, p.Err()
}

// pageScript reads entries ARGV[4] to ARGV[4]+ARGV[5]-1 of the entries of
// the sorted set KEYS[1] scored from ARGV[1] to ARGV[2] (descending when
// ARGV[3] is "1"), by rank: O(log N) plus the page, wherever the page is.
// It returns {count in range, {member, score, ...}}.
// A read, which go-redis may send again (not luafunc's: see ARCHITECTURE.md, Scripts).
var pageScript = redis.NewScript(`
local lo, hi, desc = ARGV[1], ARGV[2], ARGV[3] == '1'
local off, n = tonumber(ARGV[4]), tonumber(ARGV[5])
local total = redis.call('ZCOUNT', KEYS[1], lo, hi)
if off >= total or n <= 0 then return {total, {}} end
local stop = math.min(off + n, total) - 1
if desc then
  local before = redis.call('ZCOUNT', KEYS[1], '(' .. hi, '+inf')
  return {total, redis.call('ZREVRANGE', KEYS[1], before + off, before + stop, 'WITHSCORES')}
end
local before = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. lo)
return {total, redis.call('ZRANGE', KEYS[1], before + off, before + stop, 'WITHSCORES')}`)

// Page returns entries offset to offset+limit of the list Match returns,
// with its total. When every entry that passes f is in one index key (one
// queue holds them, outside fair groups and limit waits) and no kind filter
// is given, the page is read by rank, at the same cost wherever it is;
// otherwise Match reads the first offset+limit entries of each key of the
// queues holding entries in range.
func (l *Ledger) Page(ctx context.Context, qs []string, f Filter, offset, limit int) ([]Indexed, int64, bool, error) {
	var items []Indexed
	var total int64
	var exact bool
	var p Partial
	if f.Kind == "" {
		full, all, err := l.holding(ctx, qs, f)
		if !p.Add(err) {
			return nil, 0, false, err
		}
		switch len(full) {
		case 0:
			return nil, 0, all, p.Err()
		case 1:
			desc := "0"
			if f.Desc {
				desc = "1"
			}
			lo, hi := f.scoreRange()
			v, err := pageScript.Run(ctx, l.rdb, []string{full[0].key}, lo, hi, desc, offset, limit).Slice()
			if err == nil && len(v) != 2 {
				err = fmt.Errorf("malformed reply %v", v)
			}
			if err != nil {
				err = wrap("list "+string(f.State)+" of "+full[0].q, err)
				if len(p.e.Unreachable) == 0 {
					return nil, 0, false, err
				}
				p.Fail(full[0].q, err)
				return nil, 0, false, p.Err()
			}
			total, _ := v[0].(int64)
			flat, _ := v[1].([]any)
			items := make([]Indexed, 0, len(flat)/2)
			for i := 0; i+1 < len(flat); i += 2 {
				id, _ := flat[i].(string)
				sc, _ := flat[i+1].(string)
				score, _ := strconv.ParseFloat(sc, 64)
				items = append(items, Indexed{Queue: full[0].q, ID: id, Score: score})
			}
			sortIndexed(items, f.Desc)
			return items, total, all, p.Err()
		}
		// Only the keys with an entry in range are read again.
		var ex bool
		if items, total, ex, err = l.matchKeys(ctx, full, f, offset+limit); !p.Add(err) {
			return nil, 0, false, err
		}
		exact = all && ex
	} else {
		var err error
		if items, total, exact, err = l.Match(ctx, qs, f, offset+limit); !p.Add(err) {
			return nil, 0, false, err
		}
	}
	if offset >= len(items) {
		return nil, total, exact, p.Err()
	}
	return items[offset:], total, exact, p.Err()
}

// matchKeys is Match over index keys. Pending jobs are listed from the due
// index, from the fair groups' own indexes (group.lua), where a group's
// jobs other than its head wait their turn, and from the limits' wait zsets
// (flow.lua), where jobs parked on a full limit wait (scored by creation
// time, the due time they are woken at): merged by score. Without a kind
// filter every key's first need entries and count are read in one round
// trip; a kind filter reads each key's entries a chunk at a time. Keys
// whose read failed are left out, and their queues named by a
// *PartialError.
func (l *Ledger) matchKeys(ctx context.Context, keys []indexKey, f Filter, need int) ([]Indexed, int64, bool, error) {
	var items []Indexed
	var total int64
	exact := true
	names := make([]string, len(keys))
	errs := make([]error, len(keys))
	for i, k := range keys {
		names[i] = k.q
	}
	if f.Kind == "" && len(keys) > 0 {
		lo, hi := f.scoreRange()
		pipe := l.rdb.Pipeline()
		type read struct {
			zs *redis.ZSliceCmd
			n  *redis.IntCmd
		}
		reads := make([]read, len(keys))
		for i, k := range keys {
			a := redis.ZRangeArgs{Key: k.key, ByScore: true, Start: lo, Stop: hi, Count: int64(need), Rev: f.Desc}
			if f.Desc {
				a.Start, a.Stop = hi, lo
			}
			reads[i].n = pipe.ZCount(ctx, k.key, lo, hi)
			if need > 0 {
				reads[i].zs = pipe.ZRangeArgsWithScores(ctx, a)
			}
		}
		_, _ = pipe.Exec(ctx) // read per command below
		for i, r := range reads {
			if err := anyErr(r.n.Err(), zsErr(r.zs)); err != nil {
				errs[i] = wrap("list "+string(f.State)+" of "+keys[i].q, err)
				continue
			}
			total += r.n.Val()
			if r.zs == nil {
				continue
			}
			for _, z := range r.zs.Val() {
				items = append(items, Indexed{Queue: keys[i].q, ID: z.Member.(string), Score: z.Score})
			}
		}
	} else {
		for i, k := range keys {
			more, n, ex, err := l.matchKey(ctx, k.q, k.key, f, need)
			if err != nil {
				if ctx.Err() != nil {
					return nil, 0, false, err
				}
				errs[i] = err
				continue
			}
			items, total, exact = append(items, more...), total+n, exact && ex
		}
	}
	if err := partialOf(ctx, names, errs); err != nil && !errors.Is(err, ErrPartial) {
		return nil, 0, false, err
	} else if err != nil { // what the failed keys' queues read is left out too
		var p Partial
		p.Add(err)
		items = slices.DeleteFunc(items, func(it Indexed) bool { return p.Missed(it.Queue) })
		sortIndexed(items, f.Desc)
		return items[:min(len(items), need)], total, exact, err
	}
	sortIndexed(items, f.Desc)
	if len(items) > need {
		items = items[:need]
	}
	return items, total, exact, nil
}

// zsErr is c's error, nil when c was not sent.
func zsErr(c *redis.ZSliceCmd) error {
	if c == nil {
		return nil
	}
	return c.Err()
}

// pendingSideKeysOf returns, for each of queues qs, its indexes holding
// pending jobs outside the due index: each fair group's own index
// (group.lua) and each limit key's wait zset (flow.lua; the keys of the
// limits hash, which holds every key a job parked on), in one pipelined
// round trip whatever their number. Past maxGroups groups or maxLimitKeys
// limit keys only a queue's first ones by name are returned, and all is
// false. Queues whose read failed have none, and are named by a
// *PartialError.
func (l *Ledger) pendingSideKeysOf(ctx context.Context, qs []string) ([][]string, bool, error) {
	out := make([][]string, len(qs))
	if len(qs) == 0 {
		return out, true, nil
	}
	pipe := l.rdb.Pipeline()
	groups := make([]*redis.StringSliceCmd, len(qs))
	limits := make([]*redis.StringSliceCmd, len(qs))
	for i, q := range qs {
		groups[i] = pipe.HKeys(ctx, l.groupsKey(q))
		limits[i] = pipe.HKeys(ctx, l.limitsKey(q))
	}
	_, _ = pipe.Exec(ctx) // read per command below
	all := true
	errs := make([]error, len(qs))
	for i, q := range qs {
		if errs[i] = wrap("list pending of "+q, anyErr(groups[i].Err(), limits[i].Err())); errs[i] != nil {
			continue
		}
		keys, ok := l.sideKeysFrom(q, groups[i].Val(), limits[i].Val())
		out[i], all = keys, all && ok
	}
	return out, all, partialOf(ctx, qs, errs)
}

// sideKeysFrom builds queue q's side index keys from its groups' and
// limits' hash fields (see pendingSideKeysOf).
func (l *Ledger) sideKeysFrom(q string, groupFields, lkeys []string) (keys []string, all bool) {
	all = true
	names := groupFields[:0]
	for _, g := range groupFields {
		if !strings.HasPrefix(g, "#") { // the parked count, group.lua's GROUPS_T
			names = append(names, g)
		}
	}
	if len(names) > maxGroups { // a bounded read: the first maxGroups by name
		slices.Sort(names)
		names, all = names[:maxGroups], false
	}
	if len(lkeys) > maxLimitKeys {
		slices.Sort(lkeys)
		lkeys, all = lkeys[:maxLimitKeys], false
	}
	for _, g := range names {
		keys = append(keys, l.groupKey(q, g))
	}
	for _, k := range lkeys {
		keys = append(keys, l.limitWaitKey(q, k))
	}
	return keys, all
}

// sortIndexed sorts items by score (descending when desc), then queue and id.
func sortIndexed(items []Indexed, desc bool) {
	slices.SortStableFunc(items, func(a, b Indexed) int {
		c := cmp.Compare(a.Score, b.Score)
		if desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.ID, b.ID))
	})
}

// matchKey is matchKeys with a kind filter on one index key of queue q.
func (l *Ledger) matchKey(ctx context.Context, q, key string, f Filter, need int) ([]Indexed, int64, bool, error) {
	lo, hi := f.scoreRange()
	rng := func(off, n int) ([]redis.Z, error) {
		a := redis.ZRangeArgs{Key: key, ByScore: true, Start: lo, Stop: hi, Offset: int64(off), Count: int64(n), Rev: f.Desc}
		if f.Desc {
			a.Start, a.Stop = hi, lo
		}
		zs, err := l.rdb.ZRangeArgsWithScores(ctx, a).Result()
		if err != nil {
			return nil, wrap("list "+string(f.State), err)
		}
		return zs, nil
	}
	// A kind filter reads the kind of each entry, a chunk at a time.
	var out []Indexed
	var total int64
	for off := 0; off < MaxKindScan; off += kindChunk {
		zs, err := rng(off, kindChunk)
		if err != nil {
			return nil, 0, false, err
		}
		pipe := l.rdb.Pipeline()
		kinds := make([]*redis.StringCmd, len(zs))
		for i, z := range zs {
			kinds[i] = pipe.HGet(ctx, l.JobKey(q, z.Member.(string)), "kind")
		}
		if len(zs) > 0 {
			// a job key holding no hash has no kind (see jobFields)
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !wrongType(err) {
				return nil, 0, false, wrap("list kinds", err)
			}
		}
		for i, z := range zs {
			if kinds[i].Val() != f.Kind {
				continue
			}
			total++
			if len(out) < need {
				out = append(out, Indexed{Queue: q, ID: z.Member.(string), Score: z.Score})
			}
		}
		if len(zs) < kindChunk {
			return out, total, true, nil
		}
	}
	return out, total, false, nil
}

// Records reads the records of items (all in state s), in order, dropping
// those gone; kept holds the items whose record was found. A pending
// grouped job's WaitingFor says where it stands in its group. Items of a
// queue whose read failed are left out too, and the queue is named by a
// *PartialError (unless it was the only one).
func (l *Ledger) Records(ctx context.Context, s State, items []Indexed) (recs []*Record, kept []Indexed, err error) {
	byQueue := map[string][]string{}
	for _, it := range items {
		byQueue[it.Queue] = append(byQueue[it.Queue], it.ID)
	}
	found := map[string]*Record{}
	var p Partial
	for q, ids := range byQueue {
		rs, err := l.GetMany(ctx, q, s, ids)
		if err != nil {
			if ctx.Err() != nil || len(byQueue) == 1 {
				return nil, nil, err
			}
			p.Fail(q, err)
			continue
		}
		for _, r := range rs {
			found[q+"\x00"+r.ID] = r
		}
	}
	if s == Pending {
		if err := l.groupsAhead(ctx, found); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range items {
		if r, ok := found[it.Queue+"\x00"+it.ID]; ok {
			recs = append(recs, r)
			kept = append(kept, it)
		}
	}
	return recs, kept, p.Err()
}

// Prefix-search match kinds.
const (
	ByOperationIDPrefix = "operation_id_prefix"
	ByJobIDPrefix       = "job_id_prefix"
)

// SearchPrefix calls add for each job (at most MaxPrefixMatches) whose
// caller-given operation id or job id starts with prefix, scanning the
// keyspace within a budget; it reports whether the budget ran out first.
func (l *Ledger) SearchPrefix(ctx context.Context, prefix string, add func(by string, r *Record)) (bool, error) {
	qs, err := l.Queues(ctx)
	if err != nil || len(qs) == 0 {
		return false, err
	}
	const placeholder = "\x00queue\x00"
	pattern := func(key func(q, x string) string) string {
		parts := strings.Split(key(placeholder, ""), placeholder)
		for i, p := range parts {
			parts[i] = globEscape(p)
		}
		return strings.Join(parts, "*") + globEscape(prefix) + "*"
	}
	found := 0
	partial := false
	for _, kind := range []struct {
		by    string
		key   func(q, x string) string
		named bool // job ids naming their operation id (OpJobID)
	}{
		{ByOperationIDPrefix, func(q, x string) string { return l.JobKey(q, "="+Logical(q)+"="+x) }, true},
		{ByOperationIDPrefix, l.opKey, false},
		{ByJobIDPrefix, l.JobKey, false},
	} {
		keys, more, err := l.scanKeys(ctx, pattern(kind.key), MaxPrefixMatches-found)
		if err != nil {
			return false, err
		}
		partial = partial || more
		for _, k := range keys {
			if found >= MaxPrefixMatches {
				return true, nil
			}
			for _, q := range qs {
				id, ok := strings.CutPrefix(k, kind.key(q, ""))
				if !ok || !strings.HasPrefix(id, prefix) {
					continue
				}
				if kind.by == ByJobIDPrefix && strings.HasSuffix(id, ":history") || kind.named && OpJobID(q, id) == "" {
					continue // a history list
				}
				var rec *Record
				var err error
				switch {
				case kind.named:
					rec, err = l.Get(ctx, q, OpJobID(q, id))
				case kind.by == ByOperationIDPrefix:
					rec, err = l.opRecord(ctx, q, id)
				default:
					rec, err = l.Get(ctx, q, id)
				}
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return false, err
				}
				add(kind.by, rec)
				found++
			}
		}
		if found >= MaxPrefixMatches {
			return true, nil
		}
	}
	return partial, nil
}

// globEscape quotes the glob characters of SCAN's MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// opRecord returns the job owning operation id op in queue q.
func (l *Ledger) opRecord(ctx context.Context, q, op string) (*Record, error) {
	id, err := l.rdb.Get(ctx, l.opKey(q, op)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, wrap("operation", err)
	}
	return l.Get(ctx, q, id)
}

// scanKeys returns up to n keys matching pattern, on every master of a
// cluster, within maxScanCalls SCAN calls; more reports an unfinished scan.
func (l *Ledger) scanKeys(ctx context.Context, pattern string, n int) (keys []string, more bool, err error) {
	if n <= 0 {
		return nil, true, nil
	}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for calls := 0; calls < maxScanCalls; calls++ {
			ks, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return wrap("scan", err)
			}
			keys = append(keys, ks...)
			if next == 0 {
				return nil
			}
			if len(keys) >= n {
				more = true
				return nil
			}
			cursor = next
		}
		more = true
		return nil
	}
	switch c := l.rdb.(type) {
	case *redis.ClusterClient:
		mu := make(chan struct{}, 1) // masters are scanned one at a time
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, m)
		})
	default:
		err = scan(ctx, c)
	}
	slices.Sort(keys)
	return keys, more, err
}

// Leader returns the maintenance leader's lease, or nil when none is held.
func (l *Ledger) Leader(ctx context.Context) (*lease.Lease, error) {
	return l.leases.Holder(ctx, LeaderResource)
}
