package ledger

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

// maxDueIn caps FirstDue's answers, so a far-off due time (a bridged job put
// back, which waits at the end of year 9999) stays a valid duration.
const maxDueIn = 24 * time.Hour

// latestDeadline is how far ahead a lease deadline may lie and still be
// followed (expire.lua's LATEST): no lease is that long, so a running
// index entry scored beyond it (edited by hand: +inf, 1e300) is taken as
// lapsed; no reconcile look is put off that long either, so an uncertain
// index entry scored beyond it is due.
const latestDeadline = 366 * 24 * time.Hour

// FirstDue tells, for each queue, how long until its earliest pending job
// is due by the namespace's time (readNow): 0 when one is due now, -1 when the queue has no
// pending job (answers are capped at a day). It is one pipelined round trip
// of plain reads (TIME and one ZRANGE of the due index per queue), no
// script and no write: pools over many queues use it as their cheap look at
// idle queues, and claim only the queues it shows due. A paused queue's
// due jobs show as due (the claim then says the queue is paused). A queue
// whose write sequence reads lower than this ledger has seen shows as due
// too, so an idle pool's claim soon checks it for a rewind (a plain read may
// come from a lagging replica: the claim is what decides).
func (l *Ledger) FirstDue(ctx context.Context, queues []string) ([]time.Duration, error) {
	return l.first(ctx, queues, Pending, true, false, "")
}

// ArmAndFirstDue is FirstDue after setting each queue's idle flag, in the
// same round trip: the next enqueue into any of them publishes a wake-up,
// as after a claim that found nothing due. A starting pool subscribes, then
// calls it, and misses no job without claiming every queue to arm their
// wake-ups. A flag set on a queue with due jobs costs one spare wake-up.
func (l *Ledger) ArmAndFirstDue(ctx context.Context, queues []string) ([]time.Duration, error) {
	return l.first(ctx, queues, Pending, true, true, "")
}

// FirstDeadline tells, for each queue, how long until the earliest lease
// deadline of its running jobs passes by the namespace's time: 0 when one has
// passed, -1 when nothing runs (capped at a day). A queue whose recorded
// maintenance leader token is not leader shows 0 too (an Expire call with
// leader raises it, or finds leader deposed). Like FirstDue, one pipelined
// round trip of plain reads: the maintenance leader's expirer calls Expire
// only on the queues it shows due. A queue whose latest running entry is
// scored beyond any lease deadline (latestDeadline ahead: an index edited
// by hand) shows 0 as well, so its Expire call takes that entry even
// while the earliest deadline lies ahead.
func (l *Ledger) FirstDeadline(ctx context.Context, queues []string, leader lease.Token) ([]time.Duration, error) {
	return l.first(ctx, queues, Running, false, false, leader.String())
}

// FirstUncertain tells, for each queue, how long until its earliest
// uncertain job is due for a look (0: one is due, -1: none is uncertain),
// in one pipelined round trip of plain reads like FirstDue: the
// maintenance leader's resolver reads only the queues it shows due. As in
// FirstDeadline, a queue whose latest entry is scored beyond
// latestDeadline ahead (edited by hand) shows 0.
func (l *Ledger) FirstUncertain(ctx context.Context, queues []string) ([]time.Duration, error) {
	return l.first(ctx, queues, Uncertain, false, false, "")
}

// first reads the earliest score of the state index index of each queue,
// as a wait from the namespace's time (readNow); withSeq makes a queue whose write sequence
// reads behind what this ledger saw show as due, and a leader token one
// whose recorded leader token differs; arm sets each queue's idle flag
// before the reads.
func (l *Ledger) first(ctx context.Context, queues []string, index State, withSeq, arm bool, leader string) ([]time.Duration, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	now := pipe.Time(ctx)
	firsts := make([]*redis.ZSliceCmd, len(queues))
	lasts := make([]*redis.ZSliceCmd, len(queues))
	seqs := make([]*redis.SliceCmd, len(queues))
	leaders := make([]*redis.StringCmd, len(queues))
	clocks := make([]*redis.SliceCmd, len(queues))
	clockOf := map[string]*redis.SliceCmd{}
	for i, q := range queues {
		lay := l.layoutOf(q)
		p, clock := lay.prefix, lay.keys[1]
		if arm {
			pipe.Set(ctx, p+"idle", "1", 0)
		}
		firsts[i] = pipe.ZRangeWithScores(ctx, p+string(index), 0, 0)
		if index == Running || index == Uncertain {
			lasts[i] = pipe.ZRangeWithScores(ctx, p+string(index), -1, -1)
		}
		// One read per clock record: outside a Cluster every queue shares
		// the namespace's.
		if c, ok := clockOf[clock]; ok {
			clocks[i] = c
		} else {
			clocks[i] = pipe.HMGet(ctx, clock, "clk", "coff", "cat")
			clockOf[clock] = clocks[i]
		}
		if withSeq {
			seqs[i] = pipe.HMGet(ctx, p+"stats", "seq", "hist", "tenure")
		}
		if leader != "" {
			leaders[i] = pipe.Get(ctx, p+"reconciler")
		}
	}
	// A queue whose reads fail (a key of the wrong type) shows as due: the
	// call that follows reports its error for that queue alone.
	_, _ = pipe.Exec(ctx)
	t, err := now.Result()
	if err != nil {
		return nil, wrap("first due", err)
	}
	out := make([]time.Duration, len(queues))
	for i, c := range firsts {
		nowMS := readNow(t, clocks[i]) / 1000
		zs, err := c.Result()
		if err != nil {
			out[i] = 0
			continue
		}
		if withSeq && l.behind(queues[i], seqs[i]) {
			out[i] = 0 // a claim checks (through the primary) what the read suggests
			continue
		}
		if leader != "" && leaders[i].Val() != leader {
			out[i] = 0
			continue
		}
		if len(zs) == 0 {
			out[i] = -1
			continue
		}
		if lasts[i] != nil {
			if z, err := lasts[i].Result(); err != nil || (len(z) == 1 && z[0].Score > float64(nowMS+latestDeadline.Milliseconds())) {
				out[i] = 0
				continue
			}
		}
		// In floats: a score edited beyond int64 (±inf, ±1e300) has no
		// integer, and its conversion gives whatever the platform gives.
		ms := min(max(zs[0].Score-float64(nowMS), 0), float64(maxDueIn.Milliseconds()))
		out[i] = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}

// readNow estimates the namespace's time in µs from a plain read of the
// clock record (internal/epoch's epoch_now): max(TIME + offset, mark), a
// negative offset shrunk by its catch-up since it was set, without checking
// that the offset is this primary tenure's or that the clock did not step
// forward under it. A stale offset (a failover back to a true clock, or a
// clock set right, before any script ran there) only makes a queue look
// due early: the call that follows decides with the namespace's time.
func readNow(t time.Time, c *redis.SliceCmd) int64 {
	now := t.UnixMicro()
	vs, err := c.Result()
	if err != nil || len(vs) != 3 {
		return now
	}
	off := int64Of(vs[1])
	if off < 0 {
		if at := int64Of(vs[2]); at > 0 {
			off = min(0, off+(now-at)/epoch.CatchUpDiv)
		} else {
			off = 0
		}
	}
	return max(now+off, int64Of(vs[0]))
}

// behind reports whether a read of queue q's write sequence is below what
// this ledger has seen there, or of another history.
func (l *Ledger) behind(q string, c *redis.SliceCmd) bool {
	vs, err := c.Result()
	if err != nil || len(vs) == 0 {
		return false
	}
	read := int64Of(vs[0])
	hist := ""
	if len(vs) > 1 {
		hist, _ = vs[1].(string)
	}
	if len(vs) > 2 {
		if t, ok := vs[2].(string); ok {
			hist += "/" + t
		}
	}
	hist, ten := splitHist(hist)
	seen := l.watch.before(q)
	return seen.ok && (read < seen.mark.seq || hist != seen.mark.hist ||
		ten.epoch != "" && ten.epoch != seen.mark.epoch && ten.seq < seen.mark.seq)
}
