package ledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// The flow-control keys of a queue (flow.lua has the layout).
func (l *Ledger) limitsKey(q string) string { return l.prefix(q) + "limits" }
func (l *Ledger) ratesKey(q string) string  { return l.prefix(q) + "rates" }
func (l *Ledger) limitHoldersKey(q, key string) string {
	return l.prefix(q) + "limit:" + key + ":holders"
}
func (l *Ledger) limitWaitKey(q, key string) string { return l.prefix(q) + "limit:" + key + ":wait" }
func (l *Ledger) rateKey(q, key string) string      { return l.prefix(q) + "rate:" + key }
func (l *Ledger) rateHeldKey(q, key string) string  { return l.prefix(q) + "rate-held:" + key }

// waitingFor says what a pending job held back by flow control waits for,
// from its record h.
func (l *Ledger) waitingFor(ctx context.Context, q string, h map[string]string) (string, error) {
	r := &Record{}
	err := l.flowWaits(ctx, q, []*Record{r}, []map[string]string{h})
	return r.WaitingFor, err
}

// flowWaits sets the WaitingFor of each of recs (pending jobs of queue q)
// that flow control holds back, from its record in hs: one round trip for
// all of them, reading each limit key's permits once. A job deferred by
// its rate to a start that has come is due, held back by nothing: its
// record keeps the deferral until a claim takes it, so it is compared
// with the namespace's time (one more read, when a job was deferred).
func (l *Ledger) flowWaits(ctx context.Context, q string, recs []*Record, hs []map[string]string) error {
	type permits struct{ members, held *redis.IntCmd }
	byKey := map[string]permits{}
	pipe := l.rdb.Pipeline()
	var now time.Time
	for _, h := range hs {
		if h["wait"] == "rate" && now.IsZero() {
			var err error
			if now, err = l.ReadTime(ctx); err != nil {
				return err
			}
		}
		if k := h["lkey"]; h["wait"] == "limit" {
			if _, ok := byKey[k]; !ok {
				// permits held, and promised to due jobs not yet claimed
				// (they score 0: flow.lua), which park a job as held ones do
				hk := l.limitHoldersKey(q, k)
				byKey[k] = permits{pipe.ZCard(ctx, hk), pipe.ZCount(ctx, hk, "(0", "+inf")}
			}
		}
	}
	if len(byKey) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return wrap("limit holders", err)
		}
	}
	for i, h := range hs {
		switch h["wait"] {
		case "limit":
			p := byKey[h["lkey"]]
			s := fmt.Sprintf("limit %s, %d of %s held", h["lkey"], p.held.Val(), h["lmax"])
			if n := p.members.Val() - p.held.Val(); n > 0 {
				s += fmt.Sprintf(", %d promised to due jobs", n)
			}
			recs[i].WaitingFor = s
		case "rate":
			if at := msTime(h["wait_at"]); at.After(now) {
				recs[i].WaitingFor = fmt.Sprintf("rate %s, next start at %s", h["rkey"], at.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	return nil
}

// LimitStatus is one concurrency limit's key at its limit or with parked
// jobs.
type LimitStatus struct {
	// Queue is the queue holding the key's permits: of a partitioned
	// queue, the partition (each has its own permits of a key).
	Queue string `json:"queue"`
	// Key is the key as a job of it shows it (its oldest parked job, else
	// its newest holder; of a rate, its next deferred, else latest started
	// job): the values its shown args redacted replaced by Redacted, or,
	// when none could be read, its name and "[redacted <digest>]".
	Key string `json:"key"`
	// Max is the max in force: its oldest parked job's (the next wake-up
	// admits by it), else the one of the job that took its newest permit.
	Max  int `json:"max"`
	Held int `json:"held"`
	// Promised counts the permits promised to due jobs not yet claimed (an
	// enqueue's or a release's): held and promised permits together park
	// the key's next jobs.
	Promised int      `json:"promised"`
	Waiting  int      `json:"waiting"` // parked jobs
	Holders  []string `json:"holders"` // job ids holding a permit
	// AtLimit: its held and promised permits together reach Max, so the
	// key's next job parks.
	AtLimit bool `json:"at_limit"`
}

// RateStatus is one rate limit's key with deferred jobs (a key enters the
// rates hash when a job is deferred by it and leaves with its last deferred
// job, so a window that filled without a deferral is not listed).
type RateStatus struct {
	// Queue is the queue holding the key's starts: of a partitioned
	// queue, the partition (each has its own starts of a key).
	Queue string `json:"queue"`
	// Key is the key as a job of it shows it, as LimitStatus.Key.
	Key string `json:"key"`
	// Max and Per are the rate in force: its next deferred start's (which
	// is admitted by them), not the last deferred job's.
	Max      int           `json:"max"`
	Per      time.Duration `json:"per_ns"`
	Starts   int           `json:"starts"`   // in the last period
	Deferred int           `json:"deferred"` // jobs deferred to a later start
}

// maxLimitKeys bounds how many keys one Limits read returns.
const maxLimitKeys = 1000

// limitsChunk bounds the keys one pipeline or prune call of Limits and
// Counts covers.
const limitsChunk = 1000

// Limits returns queue q's concurrency limits that hold jobs back (with
// parked jobs, or at their limit: of the keys in the limits hash, which
// flow_park writes, so a key at its limit on which no job parked yet is
// not listed), keys at their limit first (then by
// key), and its rate limits that do (of the keys in the rates hash, which
// holds keys with deferred jobs: a window that filled without deferring a
// job is not listed), at most maxLimitKeys of each: a key whose jobs all run at once is
// not listed. Every entry of the limits hash is looked at,
// so a key at its limit is never hidden behind idle ones; entries whose key
// nothing holds, is promised or waits on (left by earlier versions, which
// kept every key that ever parked a job) are pruned. Rate windows are read
// in the queue's time (queueTime), which on Redis Cluster needs the
// queue's master alone.
func (l *Ledger) Limits(ctx context.Context, q string) ([]LimitStatus, []RateStatus, error) {
	lim, err := l.rdb.HGetAll(ctx, l.limitsKey(q)).Result()
	if err != nil {
		return nil, nil, wrap("limits", err)
	}
	rates, err := l.rdb.HGetAll(ctx, l.ratesKey(q)).Result()
	if err != nil {
		return nil, nil, wrap("rates", err)
	}
	now, err := l.queueTime(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	keys := sortedKeys(lim)
	rkeys := sortedKeys(rates)
	if len(rkeys) > maxLimitKeys {
		rkeys = rkeys[:maxLimitKeys]
	}
	// The counts of every key: its holders zset's members (permits and
	// promises, which score 0: flow.lua), its permits, its parked jobs.
	var out []LimitStatus
	var dead []string
	probes := map[string]string{} // per listed key, the job that shows it (keyProbe)
	for c := 0; c < len(keys); c += limitsChunk {
		part := keys[c:min(c+limitsChunk, len(keys))]
		pipe := l.rdb.Pipeline()
		members := make([]*redis.IntCmd, len(part))
		held := make([]*redis.IntCmd, len(part))
		waits := make([]*redis.IntCmd, len(part))
		next := make([]*redis.StringSliceCmd, len(part))
		last := make([]*redis.StringSliceCmd, len(part))
		for i, k := range part {
			hk, wk := l.limitHoldersKey(q, k), l.limitWaitKey(q, k)
			members[i] = pipe.ZCard(ctx, hk)
			held[i] = pipe.ZCount(ctx, hk, "(0", "+inf")
			waits[i] = pipe.ZCard(ctx, wk)
			next[i] = pipe.ZRange(ctx, wk, 0, 0)
			last[i] = pipe.ZRange(ctx, hk, -1, -1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, wrap("limits", err)
		}
		maxes := l.limitMaxes(ctx, q, next, last)
		for i, k := range part {
			mx := atoi(lim[k])
			if maxes[i] > 0 {
				mx = maxes[i]
			}
			s := LimitStatus{Queue: q, Key: k, Max: mx, Held: int(held[i].Val()), Waiting: int(waits[i].Val()),
				Promised: int(members[i].Val() - held[i].Val())}
			if members[i].Val() == 0 && s.Waiting == 0 {
				dead = append(dead, k)
			}
			s.AtLimit = s.Held+s.Promised >= s.Max
			if !s.AtLimit && s.Waiting == 0 {
				continue // it holds no job back
			}
			out = append(out, s)
			if ids := next[i].Val(); len(ids) > 0 {
				probes[k] = ids[0]
			} else if ids := last[i].Val(); len(ids) > 0 {
				probes[k] = ids[0]
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].AtLimit && !out[j].AtLimit })
	if len(out) > maxLimitKeys {
		out = out[:maxLimitKeys]
	}
	pipe := l.rdb.Pipeline()
	holders := make([]*redis.StringSliceCmd, len(out))
	shown := make([]keyProbe, len(out), len(out)+len(rkeys))
	for i := range out {
		holders[i] = pipe.ZRangeByScore(ctx, l.limitHoldersKey(q, out[i].Key), &redis.ZRangeBy{Min: "(0", Max: "+inf"})
		shown[i] = keyProbe{key: &out[i].Key, job: probes[out[i].Key], field: "lkey"}
		shown[i].read(ctx, l, pipe, q)
	}
	starts := make([]*redis.IntCmd, len(rkeys))
	deferred := make([]*redis.IntCmd, len(rkeys))
	maxes, pers, rprobes := l.ratesInForce(ctx, q, rkeys, rates)
	rs := make([]RateStatus, len(rkeys))
	for i, k := range rkeys {
		from := "(" + strconv.FormatInt(now.Add(-pers[i]).UnixMilli(), 10)
		starts[i] = pipe.ZCount(ctx, l.rateKey(q, k), from, "+inf")
		deferred[i] = pipe.ZCount(ctx, l.rateHeldKey(q, k), from, "+inf")
		rs[i] = RateStatus{Queue: q, Key: k, Max: maxes[i], Per: pers[i]}
		p := keyProbe{key: &rs[i].Key, job: rprobes[i], field: "rkey"}
		p.read(ctx, l, pipe, q)
		shown = append(shown, p)
	}
	if len(out)+len(rkeys) > 0 {
		// a probe's read that failed (a job key of another type) shows
		// its key digested; the counts' fail the read
		_, _ = pipe.Exec(ctx)
		for _, c := range holders {
			if err := c.Err(); err != nil {
				return nil, nil, wrap("limits", err)
			}
		}
		for _, c := range slices.Concat(starts, deferred) {
			if err := c.Err(); err != nil {
				return nil, nil, wrap("limits", err)
			}
		}
	}
	for i := range out {
		s := &out[i]
		s.Holders = holders[i].Val()
		if s.Holders == nil {
			s.Holders = []string{}
		}
		s.Held = len(s.Holders) // as listed, though a permit ended since the count
		s.AtLimit = s.Held+s.Promised >= s.Max
	}
	for i := range shown {
		shown[i].show()
	}
	if out == nil {
		out = []LimitStatus{}
	}
	listed := make([]RateStatus, 0, len(rkeys))
	for i, r := range rs {
		r.Starts, r.Deferred = int(starts[i].Val()), int(deferred[i].Val())
		if r.Deferred > 0 || r.Starts >= r.Max { // else it holds no job back
			listed = append(listed, r)
		}
	}
	l.pruneLimits(ctx, q, dead)
	return out, listed, nil
}

// limitMaxes returns, per limit key, the max in force (0: unknown, the
// limits hash's then counts): the one of its oldest parked job (next[i]),
// which the next wake-up admits by, else of the job that took its newest
// permit (last[i]). The limits hash keeps the max of the last job that
// parked, which after a limit changed is not the one the key runs under.
// Best effort: a record unreadable (gone, of another type) reads as 0.
func (l *Ledger) limitMaxes(ctx context.Context, q string, next, last []*redis.StringSliceCmd) []int {
	out := make([]int, len(next))
	cmds := make([]*redis.StringCmd, len(next))
	pipe := l.rdb.Pipeline()
	for i := range next {
		ids := next[i].Val()
		if len(ids) == 0 {
			ids = last[i].Val()
		}
		if len(ids) > 0 {
			cmds[i] = pipe.HGet(ctx, l.JobKey(q, ids[0]), "lmax")
		}
	}
	if pipe.Len() == 0 {
		return out
	}
	_, _ = pipe.Exec(ctx) // read per command below
	for i, c := range cmds {
		if c != nil {
			out[i] = atoi(c.Val())
		}
	}
	return out
}

// ratesInForce returns, per rate key of keys, the max and period in force:
// those of its next deferred start (the deferral scored lowest), which is
// admitted by them, else the rates hash's (vals). The hash keeps the rate of
// the last job deferred, which after a rate changed is not the one the key
// runs under. Best effort: a record unreadable (gone, of another type)
// reads as the hash's. It returns too, per key, the job that shows it
// (keyProbe): that next deferred job, else the latest started one ("" when
// none).
func (l *Ledger) ratesInForce(ctx context.Context, q string, keys []string, vals map[string]string) ([]int, []time.Duration, []string) {
	maxes, pers, probes := make([]int, len(keys)), make([]time.Duration, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		mx, per, _ := strings.Cut(vals[k], "/")
		maxes[i], pers[i] = atoi(mx), time.Duration(atoi(per))*time.Millisecond
	}
	if len(keys) == 0 {
		return maxes, pers, probes
	}
	pipe := l.rdb.Pipeline()
	next := make([]*redis.StringSliceCmd, len(keys))
	latest := make([]*redis.StringSliceCmd, len(keys))
	for i, k := range keys {
		next[i] = pipe.ZRange(ctx, l.rateHeldKey(q, k), 0, 0)
		latest[i] = pipe.ZRange(ctx, l.rateKey(q, k), -1, -1)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	fields := make([]*redis.SliceCmd, len(keys))
	for i, c := range next {
		if ids := c.Val(); len(ids) > 0 {
			fields[i] = pipe.HMGet(ctx, l.JobKey(q, ids[0]), "rkey", "rmax", "rper")
			probes[i] = ids[0]
		} else if starts := latest[i].Val(); len(starts) > 0 {
			// a start is "<job id>:<µs>" (flow.lua)
			if at := strings.LastIndexByte(starts[0], ':'); at > 0 {
				probes[i] = starts[0][:at]
			}
		}
	}
	if pipe.Len() == 0 {
		return maxes, pers, probes
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range fields {
		if c == nil {
			continue
		}
		f := c.Val()
		key, _ := f[0].(string)
		mx, _ := f[1].(string)
		per, _ := f[2].(string)
		if key == keys[i] && atoi(mx) > 0 && atoi(per) > 0 {
			maxes[i], pers[i] = atoi(mx), time.Duration(atoi(per))*time.Millisecond
		}
	}
	return maxes, pers, probes
}

// limitsPruneScript drops from a queue's limits hash (KEYS[1]) each key of
// ARGV that nothing holds, is promised or waits on: KEYS[2i] and
// KEYS[2i+1] are key ARGV[i]'s holders and wait zsets (flow.lua), looked at
// again in the script, so a key a job parked on since the caller's read keeps
// its entry.
var limitsPruneScript = luafunc.NewPlain(`
local n = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[2 * i], KEYS[2 * i + 1]) == 0 then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return n`)

// pruneLimits drops the limits hash entries of keys of queue q that
// nothing holds, is promised or waits on (Limits and Counts found them so):
// housekeeping of entries earlier versions left, best effort (an entry left
// costs a read, never a wrong answer).
func (l *Ledger) pruneLimits(ctx context.Context, q string, keys []string) {
	for c := 0; c < len(keys); c += limitsChunk {
		part := keys[c:min(c+limitsChunk, len(keys))]
		ks := make([]string, 0, 1+2*len(part))
		ks = append(ks, l.limitsKey(q))
		args := make([]any, len(part))
		for i, k := range part {
			ks = append(ks, l.limitHoldersKey(q, k), l.limitWaitKey(q, k))
			args[i] = k
		}
		if limitsPruneScript.Run(ctx, l.rdb, ks, args...).Err() != nil {
			return
		}
	}
}

// sortedKeys returns the keys of m in order (callers cap them).
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// HasFlow reports, for each of queues names, whether it has a limits,
// rates or groups hash (Limits and Groups read nothing for a queue
// without), in one pipelined round trip. Names whose read failed read as
// false, and are named by a *PartialError.
func (l *Ledger) HasFlow(ctx context.Context, names []string) ([]bool, error) {
	out := make([]bool, len(names))
	if len(names) == 0 {
		return out, nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([][3]*redis.IntCmd, len(names))
	for i, q := range names {
		cmds[i] = [3]*redis.IntCmd{pipe.Exists(ctx, l.limitsKey(q)), pipe.Exists(ctx, l.ratesKey(q)), pipe.Exists(ctx, l.groupsKey(q))}
	}
	_, _ = pipe.Exec(ctx) // read per command below
	errs := make([]error, len(names))
	for i, c := range cmds {
		for _, cmd := range c {
			n, err := cmd.Result()
			if err != nil {
				errs[i], out[i] = wrap("flow of "+names[i], err), false
				break
			}
			out[i] = out[i] || n > 0
		}
	}
	return out, partialOf(ctx, names, errs)
}
