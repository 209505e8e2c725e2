package jobs

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// QueueOverview is one queue's part of Inspector.Overview: what Counts,
// Stats, Paused, Partitions and PartitionChanges return for it.
type QueueOverview struct {
	// Queue is the queue's name.
	Queue string
	// Counts are its jobs per state, summed over its partitions.
	Counts map[State]int64
	// Stats are its counters, summed over its partitions; of a partitioned
	// queue, without seq, each partition's own write sequence (in
	// PartitionStats), which a sum would not be (see Inspector.Stats).
	Stats map[string]int64
	// Paused is its pause, nil while it runs (see Inspector.Paused).
	Paused *Pause
	// Layout is a partitioned queue's layout (nil for a queue with one
	// name).
	Layout *QueueLayout
	// PartitionStats are each of Layout.Partitions' counters, in their
	// order.
	PartitionStats []map[string]int64
	// Changes are the queue's layout changes, newest first.
	Changes []PartitionChange
	// Unreachable names the queue names (the queue's own, or its
	// partitions') whose reads failed, their master down most likely:
	// Counts, Stats and Paused leave them out (Overview then returns an
	// error matching ErrPartial).
	Unreachable []string
}

// queueNames is the registry read once: every logical queue (sorted) and
// the names holding its jobs, with its registered partition count.
type queueNames struct {
	queues []string
	counts []int
	names  [][]string
}

// flat returns every name holding jobs, queue by queue.
func (qn *queueNames) flat() []string {
	var all []string
	for _, names := range qn.names {
		all = append(all, names...)
	}
	return all
}

// allNames reads the queue registry and the partition counts in two round
// trips. A registry member whose queue name no call could take (written by
// hand) is left out, rather than failing every view over all queues.
func (in *Inspector) allNames(ctx context.Context) (*queueNames, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	raw, err := in.l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := &queueNames{}
	for _, q := range raw {
		if q = ledger.Logical(q); ValidateQueue(q) == nil && (len(out.queues) == 0 || out.queues[len(out.queues)-1] != q) {
			out.queues = append(out.queues, q)
		}
	}
	sort.Strings(out.queues)
	if out.counts, err = in.l.PartitionsOf(ctx, out.queues...); err != nil {
		return nil, err
	}
	out.names = make([][]string, len(out.queues))
	for i, q := range out.queues {
		out.names[i] = ledger.Physical(q, out.counts[i], raw)
	}
	return out, nil
}

// Overview returns every queue's counts, counters, pause and, for a
// partitioned queue, its partitions and layout changes, sorted by queue:
// what Counts, Stats, Paused, Partitions and PartitionChanges return for
// each, in a fixed number of round trips whatever the number of queues
// (the registry, the partition counts, the counts in one or two, the
// counters, pauses and layout changes in one). When some queue names could
// not be read but others could (on Redis Cluster, a master down), it
// returns every queue with those names in Unreachable, and an error
// matching ErrPartial.
func (in *Inspector) Overview(ctx context.Context) ([]QueueOverview, error) {
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	var all, layouts []string
	for i, q := range qn.queues {
		all = append(all, qn.names[i]...)
		if qn.counts[i] > 1 || len(qn.names[i]) > 1 {
			layouts = append(layouts, q)
		}
	}
	counts, err := in.l.CountsOf(ctx, all)
	if err != nil {
		return nil, err
	}
	sums, changes, changeErrs, err := in.l.Summaries(ctx, all, layouts)
	if err != nil {
		return nil, err
	}
	partial := false
	out := make([]QueueOverview, len(qn.queues))
	at, li := 0, 0
	for i, q := range qn.queues {
		o := &out[i]
		o.Queue, o.Counts, o.Stats = q, map[State]int64{}, map[string]int64{}
		names := qn.names[i]
		var ps []*Pause
		for k, n := range names {
			if counts[at+k].Err != nil || sums[at+k].Err != nil {
				o.Unreachable = append(o.Unreachable, n)
				continue
			}
			for s, n := range counts[at+k].Jobs {
				o.Counts[s] += n
			}
			for c, n := range sums[at+k].Stats {
				o.Stats[c] += n
			}
			ps = append(ps, sums[at+k].Paused)
		}
		if len(names) > 1 {
			delete(o.Stats, statSeq)
		}
		o.Paused = mainPause(ps)
		if qn.counts[i] > 1 || len(names) > 1 {
			if o.Layout, o.PartitionStats, err = in.layoutOf(ctx, q, qn.counts[i], names, counts[at:at+len(names)], sums[at:at+len(names)]); err != nil {
				return nil, err
			}
			o.Changes = changes[li]
			if changeErrs[li] != nil && !slices.Contains(o.Unreachable, q) {
				o.Unreachable = append(o.Unreachable, q)
			}
			li++
		}
		partial = partial || len(o.Unreachable) > 0
		at += len(names)
	}
	if partial {
		return out, ErrPartial
	}
	return out, nil
}

// layoutOf builds queue q's layout (as Partitions does) from its names'
// counts and summaries, with each partition's counters.
func (in *Inspector) layoutOf(ctx context.Context, q string, p int, names []string, counts []ledger.QueueCounts, sums []ledger.QueueSummary) (*QueueLayout, []map[string]int64, error) {
	index := map[string]int{}
	for k, n := range ledger.PartitionNames(q, p) {
		index[n] = k
	}
	out := &QueueLayout{Queue: q, Count: p}
	stats := make([]map[string]int64, 0, len(names))
	for i, n := range names {
		k, ok := index[n]
		if !ok {
			k = -1
		}
		part := Partition{Name: n, Index: k, Slot: ledger.Slot(n), Counts: counts[i].Jobs, Paused: sums[i].Paused}
		if err := cmp.Or(counts[i].Err, sums[i].Err); err != nil {
			part.Counts, part.Paused, part.Unreachable = nil, nil, err.Error()
		}
		var err error
		if part.Master, err = in.l.Master(ctx, n); err != nil {
			return nil, nil, err
		}
		out.Partitions = append(out.Partitions, part)
		stats = append(stats, sums[i].Stats)
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := out.Partitions[order[i]], out.Partitions[order[j]]
		if (a.Index < 0) != (b.Index < 0) {
			return a.Index >= 0
		}
		return a.Index < b.Index
	})
	parts := make([]Partition, len(order))
	sorted := make([]map[string]int64, len(order))
	for i, k := range order {
		parts[i], sorted[i] = out.Partitions[k], stats[k]
	}
	out.Partitions = parts
	return out, sorted, nil
}

// AllDueRunning returns up to limit jobs of all queues running with a
// lease deadline at or before t (as DueRunning does for one queue), those
// due first: one round trip reads every queue's due index, then the
// records of the limit due first, one round trip per queue holding some.
// A limit of 0 or below returns none. When some queue names could not be
// read, it returns the others' jobs with a *PartialError naming them.
func (in *Inspector) AllDueRunning(ctx context.Context, t time.Time, limit int) ([]*Record, error) {
	qn, err := in.allNames(ctx)
	if err != nil || limit <= 0 {
		return nil, err
	}
	all := qn.flat()
	var missed ledger.Partial
	due, err := in.l.DueIDsOf(ctx, all, Running, t, limit)
	if !missed.Add(err) {
		return nil, err
	}
	type cand struct {
		name int
		id   string
		at   float64
	}
	var cs []cand
	for i, zs := range due {
		for _, z := range zs {
			id, _ := z.Member.(string)
			cs = append(cs, cand{i, id, z.Score})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].at < cs[j].at })
	cs = cs[:min(len(cs), limit)]
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	var out []*Record
	for i := 0; i < len(cs); {
		j := i
		var ids []string
		for ; j < len(cs) && cs[j].name == cs[i].name; j++ {
			ids = append(ids, cs[j].id)
		}
		recs, err := in.l.GetMany(ctx, all[cs[i].name], Running, ids)
		if err != nil && ctx.Err() == nil {
			missed.Fail(all[cs[i].name], err)
		} else if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		i = j
	}
	return out, missed.Err()
}

// QueueFlow is one queue's part of Inspector.AllLimits: what Limits and
// Groups return for it.
type QueueFlow struct {
	// Queue is the queue's name.
	Queue string
	// Flow is its concurrency and rate limits, as Limits returns them.
	Flow *FlowStatus
	// Groups are its fair groups with pending jobs, as Groups returns
	// them.
	Groups []GroupStatus
}

// AllLimits returns, for every queue with concurrency limits, rate limits
// or fair groups, sorted by queue, what Limits and Groups return: one
// pipelined round trip finds those queues, so a queue without any costs
// no more. When some queue names could not be read, it returns the others'
// limits, rates and groups with a *PartialError naming them.
func (in *Inspector) AllLimits(ctx context.Context) ([]QueueFlow, error) {
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	all := qn.flat()
	var missed ledger.Partial
	has, err := in.l.HasFlow(ctx, all)
	if !missed.Add(err) {
		return nil, err
	}
	var out []QueueFlow
	at := 0
	for i, q := range qn.queues {
		names := qn.names[i]
		flows := slices.Contains(has[at:at+len(names)], true)
		at += len(names)
		if !flows {
			continue
		}
		f := QueueFlow{Queue: q, Flow: &FlowStatus{Limits: []LimitStatus{}, Rates: []RateStatus{}}, Groups: []GroupStatus{}}
		for _, n := range names {
			if missed.Missed(n) {
				continue
			}
			ls, rs, err := in.l.Limits(ctx, n)
			if err == nil {
				var gs []GroupStatus
				gs, err = in.l.Groups(ctx, n)
				f.Groups = append(f.Groups, gs...)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				missed.Fail(n, err)
				continue
			}
			f.Flow.Limits = append(f.Flow.Limits, ls...)
			f.Flow.Rates = append(f.Flow.Rates, rs...)
		}
		if len(names) > 1 {
			slices.SortStableFunc(f.Groups, func(a, b GroupStatus) int { return b.Pending - a.Pending })
		}
		out = append(out, f)
	}
	return out, missed.Err()
}

// QueueHistory is one queue's part of Inspector.AllHistory: what Series,
// Minutes and Counts return for it.
type QueueHistory struct {
	// Queue is the queue's name.
	Queue string
	// Series are its per-minute snapshots, oldest first, as Series
	// returns them.
	Series []SeriesBucket
	// Minutes are its counts per minute, oldest first, as Minutes returns
	// them.
	Minutes []MinuteCounts
	// Counts are its jobs per state now, as Counts returns them.
	Counts map[State]int64
}

// AllHistory returns, for every queue sorted by name, its snapshots since
// from (as Series), its counts per minute from the minute holding from to
// the one holding to (as Minutes) and its jobs per state (as Counts), in a
// fixed number of round trips whatever the number of queues. The minutes
// after the maintenance leader's newest snapshot whose counters equal a
// queue's counters now are not read (they counted nothing: see
// internal/ledger's HistoryOf), so an idle queue costs a few reads, not
// one per minute of the window. When some queue names could not be read,
// it returns every queue with the others' sums and a *PartialError naming
// them.
func (in *Inspector) AllHistory(ctx context.Context, from, to time.Time) ([]QueueHistory, error) {
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	all := qn.flat()
	var missed ledger.Partial
	hs, err := in.l.HistoryOf(ctx, all, from, to)
	if !missed.Add(err) {
		return nil, err
	}
	counts, err := in.l.CountsOf(ctx, all)
	if err != nil {
		return nil, err
	}
	out := make([]QueueHistory, len(qn.queues))
	at := 0
	for i, q := range qn.queues {
		names := qn.names[i]
		series := make([][]SeriesBucket, len(names))
		minutes := make([][]MinuteCounts, len(names))
		o := &out[i]
		o.Queue, o.Counts = q, map[State]int64{}
		for k, n := range names {
			series[k], minutes[k] = hs[at+k].Series, hs[at+k].Minutes
			if counts[at+k].Err != nil {
				missed.Fail(n, counts[at+k].Err)
			}
			for s, n := range counts[at+k].Jobs {
				o.Counts[s] += n
			}
		}
		o.Series, o.Minutes = mergeSeries(series), mergeMinutes(minutes)
		at += len(names)
	}
	return out, missed.Err()
}

// QueuePause is one queue's part of Inspector.AllPaused.
type QueuePause struct {
	// Queue is the queue's name.
	Queue string
	// Paused is its pause, nil while it runs (see Inspector.Paused).
	Paused *Pause
}

// AllPaused returns every queue's pause (as Paused returns it), sorted by
// queue, in three round trips whatever the number of queues: the
// registry, the partition counts and every name's pause. When some queue
// names could not be read, it returns every queue's pause as the others
// read it, with a *PartialError naming them.
func (in *Inspector) AllPaused(ctx context.Context) ([]QueuePause, error) {
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := in.l.PausedOf(ctx, qn.flat())
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	out := make([]QueuePause, len(qn.queues))
	at := 0
	for i, q := range qn.queues {
		n := len(qn.names[i])
		out[i] = QueuePause{Queue: q, Paused: mainPause(ps[at : at+n])}
		at += n
	}
	return out, err
}

// QueuesHolding returns the queues (sorted) holding a job with id id, in
// any partition: those where Get finds it. A job id is unique in its
// queue, not across queues (a bridged task's id is unique only in its
// asynq queue). Three round trips read every queue, whatever their number.
// When some queue names could not be read, it returns the queues found
// among the others with a *PartialError naming them.
func (in *Inspector) QueuesHolding(ctx context.Context, id string) ([]string, error) {
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	has, err := in.l.HoldJob(ctx, qn.flat(), id)
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return qn.queuesWith(has), err
}

// queuesWith returns the queues of which a name is true in has (indexed as
// flat's names).
func (qn *queueNames) queuesWith(has []bool) []string {
	var out []string
	at := 0
	for i, q := range qn.queues {
		n := len(qn.names[i])
		if slices.Contains(has[at:at+n], true) {
			out = append(out, q)
		}
		at += n
	}
	return out
}

// FindByOperationAll returns, sorted by queue, the job owning operation id
// op in each queue holding one (as FindByOperationIn finds it): the same
// operation id on two queues is two jobs. An op ValidateOperationID
// refuses is an error matching ErrInvalid, before any read. One pipelined
// round trip over every queue (after the registry's two) finds the names
// (queues and partitions) that may hold one; only those are read further.
// When some queue names could not be read, it returns the jobs found among
// the others with a *PartialError naming them.
func (in *Inspector) FindByOperationAll(ctx context.Context, op string) ([]*Record, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	if err := ValidateOperationID(op); err != nil {
		return nil, err
	}
	qn, err := in.allNames(ctx)
	if err != nil {
		return nil, err
	}
	var missed ledger.Partial
	may, err := in.l.MayHoldOperation(ctx, qn.flat(), op)
	if !missed.Add(err) {
		return nil, err
	}
	var out []*Record
	at := 0
	for i := range qn.queues {
		var hits []string
		for _, n := range qn.names[i] {
			if may[at] {
				hits = append(hits, n)
			}
			at++
		}
		if len(hits) == 0 {
			continue
		}
		r, err := in.l.FindByOperationIn(ctx, hits, op)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil && ctx.Err() == nil {
			for _, n := range hits {
				missed.Fail(n, err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, missed.Err()
}
