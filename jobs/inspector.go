package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/lease"
)

// Inspector is the read API over one namespace: queues and their counts,
// jobs listed, filtered and paged, a job's history, recent events, live
// pools, periodic schedules, per-minute history and the maintenance leader.
// The dashboard and the fencedq CLI read through it. It is safe for
// concurrent use. Get one from Client.Inspector or NewInspector.
type Inspector struct {
	l     *ledger.Ledger
	nsErr error
}

// NewInspector returns an Inspector over rdb for cfg's namespace (only
// Namespace is read). A nil rdb or an invalid Config makes every call fail
// with an error matching ErrInvalid, and so does every call on a nil or
// zero Inspector.
func NewInspector(rdb redis.UniversalClient, cfg Config) *Inspector {
	return &Inspector{l: ledger.New(rdb, cfg.ledger()), nsErr: configErr("NewInspector", rdb, cfg)}
}

// Namespace returns the key namespace the inspector reads ("" for a nil
// or zero Inspector).
func (in *Inspector) Namespace() string {
	if in == nil || in.l == nil {
		return ""
	}
	return in.l.Namespace()
}

// err is what every read fails with: the mistake NewInspector (or
// NewClient) found, or ErrInvalid for a nil or zero Inspector.
func (in *Inspector) err() error {
	if in == nil || (in.l == nil && in.nsErr == nil) {
		return invalid("a nil or zero jobs.Inspector: get it from NewInspector or Client.Inspector")
	}
	return in.nsErr
}

// Queues returns the namespace's queue names, sorted. A partitioned
// queue is one name (its partitions are listed by Partitions).
func (in *Inspector) Queues(ctx context.Context) ([]string, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	qs, err := in.l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := qs[:0]
	for _, q := range qs {
		if q = ledger.Logical(q); len(out) == 0 || out[len(out)-1] != q {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// Counts returns queue q's number of jobs in each state (summed over its
// partitions; a partition's name reads that partition alone). When some
// partitions could not be read, it returns the others' sums with a
// *PartialError naming them.
func (in *Inspector) Counts(ctx context.Context, q string) (map[State]int64, error) {
	out := map[State]int64{}
	err := in.eachOf(ctx, q, func(n string) error {
		c, err := in.l.Counts(ctx, n)
		for s, v := range c {
			out[s] += v
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return out, err
}

// Stats returns queue q's cumulative counters (enqueued, attempted,
// succeeded, dead, cancelled, retried, deferred, uncertain,
// deduplicated_enqueue, deduplicated_unique, deduplicated_execute, fenced_commit, fenced_renew,
// dropped_missing, resolved_<decision>, raised (storage marks fed back),
// rewinds (losses detected), resubmitted (lost jobs re-created), promoted
// (workflow steps moved from waiting to pending); and seq,
// the queue's write sequence, which rewind detection follows).
// A partitioned queue's counters are summed over its partitions, all but
// seq: each partition has a write sequence of its own, which a sum would
// not be, so it is left out (a partition's own Stats, by its name, has
// it). When some partitions could not be read, it returns the others'
// sums with a *PartialError naming them.
func (in *Inspector) Stats(ctx context.Context, q string) (map[string]int64, error) {
	out := map[string]int64{}
	names := 0
	err := in.eachOf(ctx, q, func(n string) error {
		names++
		st, err := in.l.Stats(ctx, n)
		for k, v := range st {
			out[k] += v
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	if names > 1 {
		delete(out, statSeq)
	}
	return out, err
}

// statSeq is the stats field holding a queue name's write sequence, which
// is no counter: the sums over a partitioned queue's names leave it out.
const statSeq = "seq"

// Paused returns who paused queue q and why, or nil when it runs. A
// partitioned queue reads as paused when any of its current partitions is
// (Client.Pause pauses them all), by the pause holding the most of them (a
// partition paused on its own before its queue was keeps its own pause;
// Inspector.Partitions shows each). When some partitions could not be
// read, it returns the others' pause with a *PartialError naming them.
func (in *Inspector) Paused(ctx context.Context, q string) (*Pause, error) {
	var ps []*Pause
	err := in.eachOf(ctx, q, func(n string) error {
		p, err := in.l.Paused(ctx, n)
		ps = append(ps, p)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return mainPause(ps), err
}

// Get returns job id of queue q (found in whichever partition holds it),
// or an error matching ErrNotFound. A partition that could not be read
// (its master down) does not hide the job from the others; found in none
// of those read, the error is a *PartialError, not ErrNotFound. With the
// partition registry unreadable, the job is read under q itself, and one
// not there is a *PartialError naming q's partitions (q#*).
func (in *Inspector) Get(ctx context.Context, q, id string) (*Record, error) {
	if err := in.queue(q); err != nil {
		return nil, err
	}
	n, err := locate(ctx, in.l, q, id)
	if err != nil {
		return nil, err
	}
	rec, err := in.l.Get(ctx, n, id)
	if err != nil {
		return nil, notFoundIn(ctx, in.l, n, err)
	}
	return rec, nil
}

// Find returns job id from whichever queue holds it, or an error matching
// ErrNotFound. A queue that could not be read (its master down) does not
// hide the job from the others; found in none of those read, the error is
// a *PartialError, not ErrNotFound.
func (in *Inspector) Find(ctx context.Context, id string) (*Record, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.Find(ctx, id)
}

// FindByOperation returns the job owning caller-given operation id op, in
// whichever queue, or an error matching ErrNotFound (or, when some queues
// could not be read, a *PartialError: see Find).
func (in *Inspector) FindByOperation(ctx context.Context, op string) (*Record, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.FindByOperation(ctx, op)
}

// FindByOperationIn returns the job owning operation id op in queue q (a
// partitioned queue's partitions, or one partition by its name), or an
// error matching ErrNotFound: the same operation id on two queues makes two
// jobs, and FindByOperation returns either. A partition that could not be
// read (its master down) does not hide the job from the others; found in
// none of those read, the error is a *PartialError, not ErrNotFound (as
// for FindByOperation, Find and Get).
func (in *Inspector) FindByOperationIn(ctx context.Context, q, op string) (*Record, error) {
	names, err := in.names(ctx, q)
	if err != nil {
		return nil, err
	}
	r, err := in.l.FindOperation(ctx, names, op)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: operation %s in queue %s", ErrNotFound, ledger.ShownID(op), q)
	}
	return r, err
}

// History returns job id's timeline, oldest first: enqueue, each attempt
// and its outcome, fenced rejections, reconcile decisions, operator actions.
// An id no job of q has (or one expired after retention) is ErrNotFound.
func (in *Inspector) History(ctx context.Context, q, id string) ([]Entry, error) {
	if err := in.queue(q); err != nil {
		return nil, err
	}
	name, err := locate(ctx, in.l, q, id)
	if err != nil {
		return nil, err
	}
	h, err := in.l.History(ctx, name, id)
	if err != nil {
		return nil, notFoundIn(ctx, in.l, name, err)
	}
	return h, nil
}

// Events returns queue q's latest n events, newest first (merged over its
// partitions); none when n is not positive. When some partitions could not
// be read, it returns the others' with a *PartialError naming them.
func (in *Inspector) Events(ctx context.Context, q string, n int) ([]Event, error) {
	if n <= 0 {
		_, err := in.names(ctx, q)
		return nil, err
	}
	var out []Event
	err := in.eachOf(ctx, q, func(name string) error {
		ev, err := in.l.Events(ctx, name, n)
		out = append(out, ev...)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > n {
		out = out[:n]
	}
	return out, err
}

// AllEvents returns every queue's latest events, newest first, by queue
// (merged over its partitions), in two round trips whatever the number of
// queues: at most perQueue of each queue's feeds, and fewer when there are
// many, so that at most budget events are read in all (at least one per
// feed). When some queue names could not be read, it returns the others'
// with a *PartialError naming them.
func (in *Inspector) AllEvents(ctx context.Context, perQueue, budget int) (map[string][]Event, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	names, err := in.l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	n := perQueue
	if len(names) > 0 {
		n = min(n, max(1, budget/len(names)))
	}
	evs, err := in.l.EventsOf(ctx, names, n)
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	out := make(map[string][]Event)
	for i, name := range names {
		q := ledger.Logical(name)
		out[q] = append(out[q], evs[i]...)
	}
	for q, ev := range out {
		if len(ev) == 0 {
			delete(out, q)
			continue
		}
		sort.SliceStable(ev, func(i, j int) bool { return ev[i].At.After(ev[j].At) })
	}
	return out, err
}

// DueRunning returns up to limit jobs of queue q running with a lease
// deadline at or before t (by Redis's clock: see ServerTime): stuck or
// about to expire, and those whose index entry is scored beyond any
// lease deadline (edited by hand: +inf), which no lease ends, first. A
// limit of 0 or below returns none. When some
// partitions could not be read, it returns the others' with a
// *PartialError naming them.
func (in *Inspector) DueRunning(ctx context.Context, q string, t time.Time, limit int) ([]*Record, error) {
	var out []*Record
	err := in.eachOf(ctx, q, func(n string) error {
		if len(out) >= limit {
			return nil
		}
		ids, err := in.l.DueIDs(ctx, n, Running, t, limit-len(out))
		if err != nil {
			return err
		}
		recs, err := in.l.GetMany(ctx, n, Running, ids)
		out = append(out, recs...)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return out, err
}

// MaxListWindow bounds ListParams: Offset+Limit and Select are at most
// this many. A page of jobs that all sit in one index (one queue, outside
// fair groups and limit waits) with no kind filter is read by rank, at the
// same cost wherever it is; otherwise List reads Offset+Limit index entries
// of every queue it lists.
const MaxListWindow = 1_000_000

// ListParams selects a page of jobs in one state.
type ListParams struct {
	// State is the state listed (required).
	State State
	// Queue limits the list to one queue; "" lists every queue.
	Queue string
	// Kind limits the list to one kind; "" lists every kind. A kind filter
	// reads at most 20 000 index entries per queue; past that Total is a
	// lower bound.
	Kind string
	// From and To bound the state index's time (pending: due time; running:
	// lease deadline; uncertain: next look; others: time entered); zero is
	// unbounded.
	From, To time.Time
	// Desc lists newest first (default oldest first).
	Desc bool
	// Offset and Limit page the list (Limit 0: 50; Offset+Limit at most
	// MaxListWindow).
	Offset, Limit int
	// Select, when positive, also returns the references of up to Select
	// matching jobs from the start of the list (for a bulk action).
	Select int
}

// JobRef names one job.
type JobRef struct {
	// Queue is the name of the queue holding the job (a partition's name
	// on a partitioned queue, as in Record.Queue).
	Queue string `json:"queue"`
	// ID is the job's id.
	ID string `json:"id"`
}

// Listed is a listed job and its place in the state index.
type Listed struct {
	// Record is the job, as Get reads it.
	*Record
	// IndexAt is the job's time in the state index (see ListParams.From).
	IndexAt time.Time
}

// JobList is one page of a list.
type JobList struct {
	// Jobs is the page, in ListParams' order.
	Jobs []Listed
	// Total counts the jobs that pass the filters.
	Total int64
	// TotalExact is false when a kind filter stopped reading a long
	// index, so Total counts only the part it read.
	TotalExact bool
	// Selection holds up to ListParams.Select matching jobs, in order.
	Selection []JobRef
	// SelectionTruncated says more jobs matched than Selection holds.
	SelectionTruncated bool
}

// List returns a page of the jobs that pass p. When some queue names (on
// Redis Cluster, those a master down holds) could not be read, it returns
// the page of the others' jobs, its total theirs, with a *PartialError
// naming them.
func (in *Inspector) List(ctx context.Context, p ListParams) (*JobList, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	if !p.State.Valid() {
		return nil, invalid("state %q is not a job state", p.State)
	}
	if p.Kind != "" {
		if err := ValidateKind(p.Kind); err != nil {
			return nil, err
		}
	}
	if p.Offset < 0 || p.Limit < 0 || p.Select < 0 {
		return nil, invalid("offset, limit and select must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 50 // counts in the window as a limit given
	}
	if p.Offset > MaxListWindow-p.Limit || p.Select > MaxListWindow {
		return nil, invalid("offset plus limit, and select, must be at most %d", MaxListWindow)
	}
	var qs []string
	var err error
	if p.Queue == "" {
		qs, err = in.l.Queues(ctx)
	} else {
		qs, err = in.names(ctx, p.Queue) // a partitioned queue's partitions
	}
	if err != nil {
		return nil, err
	}
	f := ledger.Filter{State: p.State, Kind: p.Kind, From: p.From, To: p.To, Desc: p.Desc}
	var missed ledger.Partial
	page, total, exact, err := in.l.Page(ctx, qs, f, p.Offset, p.Limit)
	if !missed.Add(err) {
		return nil, err
	}
	out := &JobList{Total: total, TotalExact: exact, Jobs: []Listed{}}
	if p.Select > 0 {
		items, _, _, err := in.l.Match(ctx, qs, f, p.Select+1)
		if !missed.Add(err) {
			return nil, err
		}
		out.Selection = []JobRef{}
		for i, it := range items {
			if i == p.Select {
				out.SelectionTruncated = true
				break
			}
			out.Selection = append(out.Selection, JobRef{Queue: it.Queue, ID: it.ID})
		}
	}
	recs, kept, err := in.l.Records(ctx, p.State, page)
	if !missed.Add(err) {
		return nil, err
	}
	for i, r := range recs {
		out.Jobs = append(out.Jobs, Listed{Record: r, IndexAt: scoreTime(kept[i].Score)})
	}
	return out, missed.Err()
}

// maxJSONMillis is the first millisecond of year 10000: encoding/json
// refuses times from there on.
const maxJSONMillis = 253402300800000

// scoreTime is an index score (unix milliseconds) as a time; a score no
// ledger writes (negative, or past year 9999) is the zero time.
func scoreTime(score float64) time.Time {
	if !(score >= 0 && score < maxJSONMillis) {
		return time.Time{}
	}
	return time.UnixMilli(int64(score))
}

// Match kinds of a search.
const (
	ByJobID             = "job_id"
	ByOperationID       = "operation_id"
	ByJobIDPrefix       = "job_id_prefix"
	ByOperationIDPrefix = "operation_id_prefix"
)

// SearchMatch is one job a search found, and what matched.
type SearchMatch struct {
	// By is ByJobID, ByOperationID, ByJobIDPrefix or ByOperationIDPrefix.
	By string
	// Record is the job found.
	Record *Record
}

// Search finds jobs by job id, then by operation id (in every queue), then,
// when prefix is true, by a job id or operation id starting with text (at
// most 20, scanning the keyspace within a budget: partial is true when the
// budget ran out first).
func (in *Inspector) Search(ctx context.Context, text string, prefix bool) (matches []SearchMatch, partial bool, err error) {
	if err := in.err(); err != nil {
		return nil, false, err
	}
	if text == "" || len(text) > MaxOperationIDLen {
		return nil, false, invalid("search text must be 1-%d bytes", MaxOperationIDLen)
	}
	seen := map[string]bool{}
	add := func(by string, r *Record) {
		if k := r.Queue + "\x00" + r.ID; !seen[k] {
			seen[k] = true
			matches = append(matches, SearchMatch{By: by, Record: r})
		}
	}
	for _, by := range []string{ByJobID, ByOperationID} {
		find := in.l.Find
		if by == ByOperationID {
			find = in.l.FindByOperation
		}
		r, err := find(ctx, text)
		switch {
		case err == nil:
			add(by, r)
		case !errors.Is(err, ErrNotFound):
			return nil, false, err
		}
	}
	if prefix {
		if partial, err = in.l.SearchPrefix(ctx, text, add); err != nil {
			return nil, false, err
		}
	}
	return matches, partial, nil
}

// Pools returns the live pools (those whose heartbeat has not expired).
func (in *Inspector) Pools(ctx context.Context) ([]PoolInfo, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.Pools(ctx)
}

// Schedules returns every registered periodic schedule.
func (in *Inspector) Schedules(ctx context.Context) ([]*Schedule, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.Schedules(ctx)
}

// Schedule returns periodic schedule id, or an error matching ErrNotFound.
func (in *Inspector) Schedule(ctx context.Context, id string) (*Schedule, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	if err := ValidateScheduleID(id); err != nil {
		return nil, err
	}
	return in.l.Schedule(ctx, id)
}

// ScheduleTicks returns schedule id's newest n ticks, newest first.
func (in *Inspector) ScheduleTicks(ctx context.Context, id string, n int) ([]Tick, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	if err := ValidateScheduleID(id); err != nil {
		return nil, err
	}
	return in.l.ScheduleTicks(ctx, id, n)
}

// Series returns queue q's per-minute snapshots since t, oldest first.
// When some partitions could not be read, it returns the others' sums
// with a *PartialError naming them.
func (in *Inspector) Series(ctx context.Context, q string, since time.Time) ([]SeriesBucket, error) {
	names, err := in.names(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(names) == 1 {
		return in.l.Series(ctx, names[0], since)
	}
	lists := make([][]SeriesBucket, 0, len(names))
	err = eachName(ctx, names, func(n string) error {
		bs, err := in.l.Series(ctx, n, since)
		lists = append(lists, bs)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return mergeSeries(lists), err
}

// mergeSeries sums partitions' buckets minute by minute, oldest first.
func mergeSeries(lists [][]SeriesBucket) []SeriesBucket {
	if len(lists) == 1 {
		return lists[0]
	}
	byMinute := map[time.Time]*SeriesBucket{}
	for _, bs := range lists {
		for _, b := range bs {
			m := byMinute[b.At]
			if m == nil {
				m = &SeriesBucket{At: b.At, Stats: map[string]int64{}, Counts: map[State]int64{}}
				byMinute[b.At] = m
			}
			for k, v := range b.Stats {
				m.Stats[k] += v
			}
			for k, v := range b.Counts {
				m.Counts[k] += v
			}
		}
	}
	out := make([]SeriesBucket, 0, len(byMinute))
	for _, b := range byMinute {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Minutes returns queue q's exact counts per minute from the minute
// holding from to the one holding to, oldest first, leaving out minutes
// that counted nothing; minutes are kept for MinuteKeep. The scripts keep
// them as they count, so every job counts whether or not a maintenance
// leader was alive (Series holds the leader's snapshots of the state
// counts). A partitioned queue's are its partitions' summed (those read,
// with a *PartialError naming the others).
func (in *Inspector) Minutes(ctx context.Context, q string, from, to time.Time) ([]MinuteCounts, error) {
	names, err := in.names(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(names) == 1 {
		return in.l.Minutes(ctx, names[0], from, to)
	}
	lists := make([][]MinuteCounts, 0, len(names))
	err = eachName(ctx, names, func(n string) error {
		ms, err := in.l.Minutes(ctx, n, from, to)
		lists = append(lists, ms)
		return err
	})
	if err != nil && !errors.Is(err, ErrPartial) {
		return nil, err
	}
	return mergeMinutes(lists), err
}

// mergeMinutes sums partitions' minutes minute by minute, oldest first.
func mergeMinutes(lists [][]MinuteCounts) []MinuteCounts {
	if len(lists) == 1 {
		return lists[0]
	}
	byMinute := map[time.Time]*MinuteCounts{}
	for _, ms := range lists {
		for _, m := range ms {
			sum := byMinute[m.At]
			if sum == nil {
				sum = &MinuteCounts{At: m.At, Counts: map[string]int64{}}
				byMinute[m.At] = sum
			}
			for k, v := range m.Counts {
				sum.Counts[k] += v
			}
		}
	}
	out := make([]MinuteCounts, 0, len(byMinute))
	for _, m := range byMinute {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// LeaderStatus is what the acting maintenance leader last published.
//
// go doc github.com/fencedq/fencedq/internal/ledger.LeaderStatus lists its fields.
type LeaderStatus = ledger.LeaderStatus

// LeaderStatus returns what the acting maintenance leader last published
// (nil when none has).
func (in *Inspector) LeaderStatus(ctx context.Context) (*LeaderStatus, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.LeaderStatus(ctx)
}

// Leader returns the maintenance leader's lease (nil when none is held).
func (in *Inspector) Leader(ctx context.Context) (*lease.Lease, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.Leader(ctx)
}

// Rewinds returns the ledger rewinds recorded on every queue (losses of
// acknowledged writes that clients, pools or bridges detected), latest
// detection first.
func (in *Inspector) Rewinds(ctx context.Context) ([]Rewind, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	qs, err := in.l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	all, err := in.l.RewindsOf(ctx, qs) // every queue in one round trip
	if err != nil {
		return nil, err
	}
	var out []Rewind
	for _, rs := range all {
		out = append(out, rs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastAt.After(out[j].LastAt) })
	return out, nil
}

// ServerTime returns the namespace's time, which every due time and
// deadline uses: Redis TIME plus the current primary tenure's offset, so it
// continues from the previous primary's after a failover to a node whose
// clock is behind (ARCHITECTURE.md, "The clock"). On Redis Cluster it is the
// server's TIME. Like every Inspector read it writes nothing.
func (in *Inspector) ServerTime(ctx context.Context) (time.Time, error) {
	if err := in.err(); err != nil {
		return time.Time{}, err
	}
	return in.l.ReadTime(ctx)
}

// Clock measures Redis's clock against this process's (one TIME call; on
// Redis Cluster one per master, returning the master farthest from this
// process's clock): the offset, within half the round trip.
func (in *Inspector) Clock(ctx context.Context) (ClockSample, error) {
	if err := in.err(); err != nil {
		return ClockSample{}, err
	}
	return in.l.Clock(ctx)
}

// NamespaceClock measures the namespace's time (see ServerTime) against
// this process's clock, as Clock measures Redis's, and returns with it the
// namespace's time minus Redis's clock: the offset that carries the time
// across a failover to a node whose clock is behind or a clock stepped
// back (0 while none is needed).
func (in *Inspector) NamespaceClock(ctx context.Context) (ClockSample, time.Duration, error) {
	if err := in.err(); err != nil {
		return ClockSample{}, 0, err
	}
	return in.l.NamespaceClock(ctx)
}

// Ping checks that Redis answers.
func (in *Inspector) Ping(ctx context.Context) error {
	if err := in.err(); err != nil {
		return err
	}
	return in.l.Ping(ctx)
}

// queue checks a queue's name or a partition's.
func (in *Inspector) queue(q string) error {
	if err := in.err(); err != nil {
		return err
	}
	return ValidateQueueRef(q)
}

// names checks q and returns the queue names holding its jobs (see
// physical). A partition's name its queue has in no layout (mistyped) is
// refused (ErrInvalid), rather than read as an empty queue.
func (in *Inspector) names(ctx context.Context, q string) ([]string, error) {
	if err := in.queue(q); err != nil {
		return nil, err
	}
	if ledger.IsPartition(q) {
		if err := knownPartition(ctx, in.l, q); err != nil {
			return nil, err
		}
	}
	return in.physical(ctx, q)
}

// eachOf runs read on each queue name holding queue q's jobs (see
// eachName). When the registries naming q's partitions could not be read
// (on Redis Cluster, their master down), it reads q itself (a queue
// without partitions, or one's jobs from before it had any) and returns a
// *PartialError naming q's partitions (registryMissed).
func (in *Inspector) eachOf(ctx context.Context, q string, read func(name string) error) error {
	names, err := in.names(ctx, q)
	if err == nil {
		return eachName(ctx, names, read)
	}
	if ctx.Err() != nil || ledger.IsPartition(q) || errors.Is(err, ErrInvalid) {
		return err
	}
	if rerr := read(q); rerr != nil {
		return err
	}
	return registryMissed(q, err)
}
