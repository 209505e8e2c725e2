package ledger

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// PruneNeeds says which of the maintenance pruner's calls a queue needs.
type PruneNeeds struct {
	Finished  bool // finished jobs past retention (Prune)
	Unique    bool // a unique index (PruneUnique)
	Groups    bool // fair groups (RepairGroups)
	Limits    bool // concurrency limits with parked jobs (RepairLimits)
	Due       bool // due-index entries scored far ahead (RepairDue)
	Workflows bool // finished workflows past retention (PruneWorkflows)
}

// PruneLook tells, for each queue, which of the pruner's calls it needs at
// now, in one pipelined round trip of plain reads (like FirstDue): a pass
// over a thousand idle queues costs one round trip, not a few thousand. A
// queue whose reads fail needs every call (each reports its error).
func (l *Ledger) PruneLook(ctx context.Context, queues []string, now time.Time) []PruneNeeds {
	cut := "(" + strconv.FormatInt(now.Add(-l.cfg.Retention).UnixMilli(), 10)
	older := func(pipe redis.Pipeliner, key string) *redis.StringSliceCmd {
		return pipe.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: cut, Count: 1})
	}
	type reads struct {
		finished       [3]*redis.StringSliceCmd
		unique, groups *redis.IntCmd
		limits         *redis.IntCmd
		due            [2]*redis.StringSliceCmd
		workflows      *redis.StringSliceCmd
	}
	far := "(" + strconv.FormatInt(now.UnixMilli()+dueFarAheadMS, 10)
	pipe := l.rdb.Pipeline()
	rs := make([]reads, len(queues))
	for i, q := range queues {
		r := &rs[i]
		for j, s := range []State{Succeeded, Dead, Cancelled} {
			r.finished[j] = older(pipe, l.StateKey(q, s))
		}
		r.unique = pipe.Exists(ctx, l.uniqueKey(q))
		r.groups = pipe.Exists(ctx, l.groupsKey(q))
		r.limits = pipe.Exists(ctx, l.limitsKey(q))
		// a bridged job waiting for its next delivery (at bridgeWait) needs no repair
		r.due[0] = pipe.ZRangeByScore(ctx, l.StateKey(q, Pending), &redis.ZRangeBy{Min: far, Max: "(" + bridgeWait, Count: 1})
		r.due[1] = pipe.ZRangeByScore(ctx, l.StateKey(q, Pending), &redis.ZRangeBy{Min: "(" + bridgeWait, Max: "+inf", Count: 1})
		r.workflows = older(pipe, l.prefix(q)+"wf_done")
	}
	_, _ = pipe.Exec(ctx) // read per command below
	out := make([]PruneNeeds, len(queues))
	for i, r := range rs {
		n := &out[i]
		for _, f := range r.finished {
			n.Finished = n.Finished || f.Err() != nil || len(f.Val()) > 0
		}
		n.Unique = r.unique.Err() != nil || r.unique.Val() > 0
		n.Groups = r.groups.Err() != nil || r.groups.Val() > 0
		n.Limits = r.limits.Err() != nil || r.limits.Val() > 0
		for _, d := range r.due {
			n.Due = n.Due || d.Err() != nil || len(d.Val()) > 0
		}
		n.Workflows = r.workflows.Err() != nil || len(r.workflows.Val()) > 0
	}
	return out
}
