package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/scriptbatch"
)

// Series bounds: one bucket a minute, kept for a day.
const (
	// SeriesStep is the width of one history bucket.
	SeriesStep = time.Minute
	// SeriesLength is how many buckets a queue keeps (24 hours).
	SeriesLength = 1440
)

// SeriesBucket is a snapshot of one queue, taken once a minute by the
// reconciler leader: the queue's cumulative counters (as Stats returns
// them) and its jobs per state at that moment. Rates are the differences
// between consecutive buckets.
type SeriesBucket struct {
	// At is the minute the snapshot belongs to (truncated to SeriesStep).
	At time.Time `json:"at"`
	// Stats are the cumulative counters (enqueued, succeeded, dead,
	// fenced_commit, deduplicated_enqueue, ...); zero counters are left out.
	Stats map[string]int64 `json:"stats"`
	// Counts are the jobs per state; zero counts are left out.
	Counts map[State]int64 `json:"counts"`
	// Read is Redis's time when the counters were read (zero in buckets
	// recorded before the field existed).
	Read time.Time `json:"read,omitzero"`
}

// seriesKey is queue q's history: a sorted set of JSON buckets scored by
// their minute (unix milliseconds), in the queue's hash slot.

// RecordSeries snapshots each of qs's counters and state counts into the
// bucket of now's minute, replacing a bucket already recorded for that
// minute, and drops buckets older than SeriesLength minutes. The history
// costs at most SeriesLength small entries per queue (a few hundred bytes
// each). counts are the queues' counts as CountsOf returned them (nil:
// read them). It reads and writes only the queues' keys, in two or three
// pipelined round trips whatever the number of queues (on Redis Cluster,
// per master), and is meant to be called once a minute by one process (the
// maintenance leader does, with the counts its status pass read); it adds
// nothing to the claim, renew or commit paths.
func (l *Ledger) RecordSeries(ctx context.Context, qs []string, counts []QueueCounts, now time.Time) error {
	for _, q := range qs {
		if err := ValidateQueueRef(q); err != nil {
			return err
		}
	}
	if len(qs) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	stats := make([]*redis.MapStringStringCmd, len(qs))
	for i, q := range qs {
		stats[i] = pipe.HGetAll(ctx, l.prefix(q)+"stats")
	}
	clock := pipe.Time(ctx)
	_, _ = pipe.Exec(ctx) // read per command below
	read, _ := clock.Result()
	if counts == nil {
		var err error
		if counts, err = l.CountsOf(ctx, qs); err != nil {
			return err
		}
	}
	at := now.Truncate(SeriesStep).UTC()
	minute := at.UnixMilli()
	score := strconv.FormatInt(minute, 10)
	oldest := strconv.FormatInt(minute-int64(SeriesLength)*SeriesStep.Milliseconds(), 10)
	var errs []error
	var calls []scriptbatch.Call
	var called []string
	for i, q := range qs {
		h, err := stats[i].Result()
		if err == nil {
			err = counts[i].Err
		}
		if err != nil {
			errs = append(errs, wrap("series of "+q, err))
			continue
		}
		b := SeriesBucket{At: at, Read: read.UTC(), Stats: map[string]int64{}, Counts: map[State]int64{}}
		for k, v := range h {
			if n, _ := strconv.ParseInt(v, 10, 64); n != 0 && k != seqHistField && k != retentionField {
				b.Stats[k] = n
			}
		}
		for st, v := range counts[i].Jobs {
			if v != 0 {
				b.Counts[st] = v
			}
		}
		raw, err := json.Marshal(b)
		if err != nil {
			errs = append(errs, wrap("series of "+q, err))
			continue
		}
		calls = append(calls, scriptbatch.Call{Script: seriesScript, Keys: []string{l.seriesKey(q)},
			Args: []any{score, raw, oldest, SeriesLength}})
		called = append(called, q)
	}
	// One script call per queue (its bucket replaced atomically), sent
	// together: on Redis Cluster each goes to its queue's master.
	if len(calls) > 0 {
		for j, cmd := range l.lanes.other.RunAll(ctx, calls) {
			if err := cmd.Err(); err != nil {
				errs = append(errs, wrap("series of "+called[j], err))
			}
		}
	}
	return errors.Join(errs...)
}

// seriesScript writes one queue's history bucket: KEYS[1] the history;
// ARGV 1 the bucket's minute (ms), 2 the bucket, 3 the oldest minute kept
// (ms), 4 the most buckets kept. A bucket already there for the minute is
// replaced.
var seriesScript = luafunc.NewPlain(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[4]) - 1)
return 1`)

// Series returns queue q's buckets from since on, oldest first (at most
// SeriesLength). Entries that do not decode are skipped.
func (l *Ledger) Series(ctx context.Context, q string, since time.Time) ([]SeriesBucket, error) {
	if err := ValidateQueueRef(q); err != nil {
		return nil, err
	}
	items, err := l.rdb.ZRangeByScore(ctx, l.seriesKey(q), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.Truncate(SeriesStep).UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, wrap("series", err)
	}
	return decodeBuckets(items), nil
}

// MinuteKeep is how long the scripts keep a minute's counts (Minutes):
// a day, and an hour to spare.
const MinuteKeep = 25 * time.Hour

// MinuteCounts are the exact counts of one queue over one minute, kept by
// the scripts as they count (every counter of Stats but the write
// sequence: enqueued, attempted, succeeded, dead, cancelled, retried,
// uncertain, resolved_review, fenced_commit, deduplicated_execute, ...). They need
// no maintenance leader: a job counts in the minute its script ran, by
// Redis's clock.
type MinuteCounts struct {
	// At is the minute's start.
	At time.Time `json:"at"`
	// Counts are the counters added during the minute; zeros are left out.
	Counts map[string]int64 `json:"counts"`
}

// Minutes returns queue q's counts per minute from the minute holding from
// to the one holding to, oldest first, leaving out minutes that counted
// nothing (or are older than MinuteKeep). One pipeline of at most one read
// per minute.
func (l *Ledger) Minutes(ctx context.Context, q string, from, to time.Time) ([]MinuteCounts, error) {
	if err := ValidateQueueRef(q); err != nil {
		return nil, err
	}
	first, n := minuteRange(from, to)
	if n == 0 {
		return nil, nil
	}
	step := SeriesStep.Milliseconds()
	p := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, n)
	for i := range cmds {
		cmds[i] = p.HGetAll(ctx, l.minuteKey(q, first+int64(i)*step))
	}
	if _, err := p.Exec(ctx); err != nil {
		return nil, wrap("minutes", err)
	}
	return decodeMinutes(cmds, first), nil
}

// QueueHistory is one queue's part of HistoryOf: what Series and Minutes
// return for it.
type QueueHistory struct {
	Series  []SeriesBucket
	Minutes []MinuteCounts
}

// HistoryOf returns, for each of queues in their order, its buckets from
// the minute holding from on (as Series) and its counts per minute from
// the minute holding from to the one holding to (as Minutes), in two
// pipelined round trips whatever the number of queues: the first reads
// each queue's counters, its buckets and its newest bucket before from;
// the second the minutes that may have counted something. A queue whose
// reads failed has neither, and is named by a *PartialError.
//
// Minutes are not read where the buckets prove them idle: every counter a
// minute's hash adds to is added to the queue's counters in the same
// script call, and counters only rise, so when the counters now equal
// those of a bucket, no minute after the bucket's read (SeriesBucket.Read,
// Redis's time) counted anything. The minute after the read's is read
// too, to spare clocks a little apart (a Redis Cluster's nodes, a ledger
// epoch's clock). A queue without such a bucket (no leader, buckets
// without Read, counters that moved) has every minute read, as Minutes
// does.
func (l *Ledger) HistoryOf(ctx context.Context, queues []string, from, to time.Time) ([]QueueHistory, error) {
	for _, q := range queues {
		if err := ValidateQueueRef(q); err != nil {
			return nil, err
		}
	}
	if len(queues) == 0 {
		return nil, nil
	}
	first, n := minuteRange(from, to)
	since := strconv.FormatInt(from.Truncate(SeriesStep).UnixMilli(), 10)
	pipe := l.rdb.Pipeline()
	stats := make([]*redis.MapStringStringCmd, len(queues))
	before := make([]*redis.StringSliceCmd, len(queues))
	within := make([]*redis.StringSliceCmd, len(queues))
	for i, q := range queues {
		stats[i] = pipe.HGetAll(ctx, l.prefix(q)+"stats")
		before[i] = pipe.ZRevRangeByScore(ctx, l.seriesKey(q), &redis.ZRangeBy{Max: "(" + since, Min: "-inf", Count: 1})
		within[i] = pipe.ZRangeByScore(ctx, l.seriesKey(q), &redis.ZRangeBy{Min: since, Max: "+inf"})
	}
	_, _ = pipe.Exec(ctx) // read per command below
	out := make([]QueueHistory, len(queues))
	errs := make([]error, len(queues))
	step := SeriesStep.Milliseconds()
	reads := make([]int64, len(queues)) // minutes read per queue, from first
	for i, q := range queues {
		items, err := within[i].Result()
		if err != nil {
			errs[i] = wrap("series of "+q, err)
			continue // none of its minutes are read
		}
		out[i].Series = decodeBuckets(items)
		reads[i] = n
		h, err := stats[i].Result()
		if n == 0 || err != nil || before[i].Err() != nil {
			continue // counters unread: every minute is read
		}
		now := seriesStats(h)
		bs := append(decodeBuckets(before[i].Val()), out[i].Series...)
		idle := int64(-1) // the earliest read of a bucket whose counters equal now's
		for k := len(bs) - 1; k >= 0 && maps.Equal(bs[k].Stats, now); k-- {
			if !bs[k].Read.IsZero() {
				idle = bs[k].Read.Truncate(SeriesStep).UnixMilli()
			}
		}
		if idle >= 0 {
			// Minutes from two after the read's on counted nothing.
			reads[i] = max(0, min(n, (idle+2*step-first)/step))
		}
	}
	mp := l.rdb.Pipeline()
	cmds := make([][]*redis.MapStringStringCmd, len(queues))
	sent := false
	for i, q := range queues {
		cmds[i] = make([]*redis.MapStringStringCmd, reads[i])
		for k := range cmds[i] {
			cmds[i][k] = mp.HGetAll(ctx, l.minuteKey(q, first+int64(k)*step))
			sent = true
		}
	}
	if sent {
		_, _ = mp.Exec(ctx) // read per command below
	}
	for i, q := range queues {
		for _, c := range cmds[i] {
			if err := c.Err(); err != nil {
				errs[i] = wrap("minutes of "+q, err)
				break
			}
		}
		if errs[i] != nil {
			out[i].Series = nil
			continue
		}
		out[i].Minutes = decodeMinutes(cmds[i], first)
	}
	return out, partialOf(ctx, queues, errs)
}

// seriesStats are counters as a bucket keeps them (RecordSeries).
func seriesStats(h map[string]string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range h {
		if n, _ := strconv.ParseInt(v, 10, 64); n != 0 && k != seqHistField && k != retentionField {
			out[k] = n
		}
	}
	return out
}

// decodeBuckets decodes a history's entries, skipping those that do not
// decode.
func decodeBuckets(items []string) []SeriesBucket {
	out := make([]SeriesBucket, 0, len(items))
	for _, s := range items {
		var b SeriesBucket
		if json.Unmarshal([]byte(s), &b) != nil || b.At.IsZero() {
			continue
		}
		if b.Stats == nil {
			b.Stats = map[string]int64{}
		}
		if b.Counts == nil {
			b.Counts = map[State]int64{}
		}
		out = append(out, b)
	}
	return out
}

// minuteRange is the minutes Minutes reads from the minute holding from to
// the one holding to: the first one's start (ms) and how many (at most MinuteKeep's worth, the newest; 0 when to is before from).
func minuteRange(from, to time.Time) (first, n int64) {
	first, last := from.Truncate(SeriesStep).UnixMilli(), to.Truncate(SeriesStep).UnixMilli()
	step := SeriesStep.Milliseconds()
	if last < first {
		return first, 0
	}
	// Minutes are counted, not walked to last: a range reaching the ends
	// of the millisecond clock would overflow last-first or m+step.
	keep := int64(MinuteKeep / SeriesStep)
	n = (last-first)/step + 1
	if last-first < 0 || n > keep {
		n, first = keep, last-(keep-1)*step
	}
	return first, n
}

// decodeMinutes are the minutes of cmds, the i-th starting i minutes after
// first, leaving out those that counted nothing.
func decodeMinutes(cmds []*redis.MapStringStringCmd, first int64) []MinuteCounts {
	step := SeriesStep.Milliseconds()
	var out []MinuteCounts
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			continue
		}
		mc := MinuteCounts{At: time.UnixMilli(first + int64(i)*step).UTC(), Counts: make(map[string]int64, len(h))}
		for k, v := range h {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n != 0 {
				mc.Counts[k] = n
			}
		}
		out = append(out, mc)
	}
	return out
}
