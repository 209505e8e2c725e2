package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
)

// MaxPartitions bounds a queue's partitions (Client.SetPartitions).
const MaxPartitions = ledger.MaxPartitions

// MaxPartitionKeyLen bounds a partition key, in bytes.
const MaxPartitionKeyLen = 1024

// PartitionRefresh is how long a client routes enqueues by the partition
// count it last read from the registry before reading it again; a pool
// reads it as often (every heartbeat). A change of a queue's partitions
// reaches every client and pool within about this long.
const PartitionRefresh = 5 * time.Second

// PartitionKey routes the job of a partitioned queue (see
// Client.SetPartitions): every job with the same key goes to the same
// partition, so jobs of one key keep their order among themselves and a
// resource they share is leased by the pools of one partition. Without a
// key a unique job's unique key decides, else a limited job's limit key (or
// rate key: see Limiter), so the job meets its duplicates and the permits
// of its key; else the operation id (so an operation id deduplicates across
// the partitions), and without any the jobs are spread evenly (one whose
// partition cannot be reached, ErrNotSent, goes to the next that can be).
// An operation id deduplicates within one partition: give the same key
// with the same operation id. Ignored on a queue without partitions. At
// most MaxPartitionKeyLen bytes.
func PartitionKey(key string) Option { return func(o *options) { o.partitionKey = key } }

// Partitioner is implemented by args that name their partition key (see
// PartitionKey; the option, when given, wins), such as the account a
// transfer touches.
type Partitioner interface {
	PartitionKey() string
}

// partitionCache holds the partition counts a client routes by.
type partitionCache struct {
	mu     sync.Mutex
	counts map[string]cachedPartitions
	spread atomic.Uint64 // the even spread's counter
	// failing is set while registry reads fail: the failure is logged
	// once, not by every enqueue of an outage.
	failing atomic.Bool
}

type cachedPartitions struct {
	p  int
	at time.Time
}

// SetPartitions declares queue q with p partitions (1 to MaxPartitions;
// 1: none), each a whole queue in its own Redis Cluster hash slot, spread
// over the cluster's masters (ARCHITECTURE.md, "Partitioned queues"). The
// count is an entry of the namespace's partition registry, not a client
// option, so every client routing enqueues and every pool claiming agree on
// it: clients and pools read it again every PartitionRefresh. It returns
// the previous count.
//
// Changing p for a queue in use is safe: jobs enqueued from then on go to
// the new partitions, jobs already in the previous ones stay there and are
// claimed until they are drained (pools serve every partition of the queue
// that the queue registry lists), and reads show both. An operation id
// enqueued before the change may be enqueued again in the new layout:
// deduplication by operation id holds within one layout. The new
// partitions start paused when every partition the queue had (or the queue
// itself, before it had any) was paused, by the pause holding the most of
// them (as Inspector.Paused shows it), and running otherwise; a partition
// kept in the new layout keeps its state. A change Redis refuses takes
// back the pauses it made of the partitions it would have added.
//
// Like the other operator actions it records who changed the count and why
// (actor and note, with the limits of MaxActorLen and MaxNoteLen, checked
// before anything is written) in the same write as the change: the newest
// MaxLayoutChanges changes of q are kept (Inspector.PartitionChanges).
// Giving the count q has already changes nothing and records nothing.
// In durable mode (Config.Durability) a write of the change too few
// replicas acknowledged does not stop it: it is made whole on the primary
// and then fails with an error matching ErrActionUnknown, the previous
// count returned.
func (c *Client) SetPartitions(ctx context.Context, q string, p int, actor, note string) (int, error) {
	if err := c.err(); err != nil {
		return 0, err
	}
	if err := ValidateQueue(q); err != nil {
		return 0, err
	}
	if p < 1 || p > MaxPartitions {
		return 0, invalid("queue %s: %d partitions is outside 1-%d", q, p, MaxPartitions)
	}
	who, err := operatorName(actor, note)
	if err != nil {
		return 0, err
	}
	paused, had, err := pausedEverywhere(ctx, c.ledger, q)
	if err != nil {
		return 0, err
	}
	// unacked is the first write too few replicas acknowledged (durable
	// mode): applied on the primary, so the change goes on, made whole
	// there, and reports it at the end
	var unacked error
	applied := func(err error) error {
		if errors.Is(err, ErrActionUnknown) {
			unacked = cmp.Or(unacked, err)
			return nil
		}
		return err
	}
	var made []string  // the pauses this call made
	if paused != nil { // paused before any pool can see them in the registry
		for _, n := range ledger.PartitionNames(q, p) {
			if had[n] {
				continue
			}
			changed, err := c.ledger.PauseAs(ctx, n, paused.ID, paused.Actor, paused.Note)
			if changed {
				made = append(made, n)
			}
			if err = applied(err); err != nil {
				c.unpause(ctx, made, paused, err)
				return 0, err
			}
		}
	}
	prev, err := c.ledger.SetPartitions(ctx, q, p, who, note)
	if err = applied(err); err != nil {
		var reply redis.Error
		if errors.As(err, &reply) { // refused by Redis: nothing written
			c.unpause(ctx, made, paused, err)
		}
		return 0, err
	}
	// A pause or resume of q that read its partitions before this change
	// did not reach the new ones: they follow the earlier ones again.
	if err := applied(c.followPause(ctx, q, p, had, paused, who, note)); err != nil {
		return 0, err
	}
	c.parts.mu.Lock()
	if c.parts.counts == nil {
		c.parts.counts = map[string]cachedPartitions{}
	}
	c.parts.counts[q] = cachedPartitions{p: p, at: time.Now()}
	c.parts.mu.Unlock()
	return prev, unacked
}

// unpause takes back the pauses of names (partitions not in any layout yet)
// that SetPartitions made before its change failed (cause), so a later
// change does not start them paused by a pause the queue no longer has.
// A failure is logged: the change's error is the caller's.
func (c *Client) unpause(ctx context.Context, names []string, p *Pause, cause error) {
	for _, n := range names {
		if err := c.ledger.Unpause(ctx, n, p.ID, p.Actor); err != nil && !errors.Is(err, ErrWrongState) {
			c.log.Warn("a refused partition change left a partition paused", "partition", n, "error", err, "change_error", cause)
		}
	}
}

// followPause brings the partitions of q's layout of p partitions that q
// did not have (had) to the state of those it had, when a pause or resume
// of q, which read its partitions before the layout changed, changed them
// since SetPartitions read them (started: the pause they had then, or nil;
// a resume is recorded as the layout change's, by who).
func (c *Client) followPause(ctx context.Context, q string, p int, had map[string]bool, started *Pause, who, note string) error {
	names := make([]string, 0, len(had))
	for n := range had {
		names = append(names, n)
	}
	sort.Strings(names)
	now, err := pauseOf(ctx, c.ledger, names)
	if err != nil || (now == nil) == (started == nil) {
		return err
	}
	var unacked error // applied on the primary: the others follow still
	for _, n := range ledger.PartitionNames(q, p) {
		if had[n] {
			continue
		}
		if now != nil {
			_, err = c.ledger.PauseAs(ctx, n, now.ID, now.Actor, now.Note)
		} else if _, err = c.ledger.ResumeIf(ctx, n, started.ID, who, note); errors.Is(err, ErrWrongState) {
			err = nil // paused since by another pause: it stays
		}
		switch {
		case errors.Is(err, ErrActionUnknown):
			unacked = cmp.Or(unacked, err)
		case err != nil:
			return err
		}
	}
	return unacked
}

// pausedEverywhere returns, when every physical queue queue q has now is
// paused, the pause holding most of them (mainPause: the pause its new
// partitions start with) and those queues (had); nil when one of them runs
// (they start running).
func pausedEverywhere(ctx context.Context, l *ledger.Ledger, q string) (*Pause, map[string]bool, error) {
	names, err := physical(ctx, l, q)
	if err != nil {
		return nil, nil, err
	}
	had := make(map[string]bool, len(names))
	for _, n := range names {
		had[n] = true
	}
	main, err := pauseOf(ctx, l, names)
	return main, had, err
}

// pauseOf returns the pause holding most queues of names (mainPause) when
// every one is paused, nil when one of them runs (new partitions then run
// too).
func pauseOf(ctx context.Context, l *ledger.Ledger, names []string) (*Pause, error) {
	ps := make([]*Pause, 0, len(names))
	for _, n := range names {
		p, err := l.Paused(ctx, n)
		if err != nil || p == nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return mainPause(ps), nil
}

// mainPause returns the pause of ps (the pauses of a queue's partitions,
// nil for one running) that holds the most partitions, nil when none is
// paused. A partition paused on its own before its queue was keeps its own
// pause, so the queue's pause is the one holding most; of pauses holding as
// many, the newest (the queue's, when it left older one-partition pauses
// in place), then the smallest id.
func mainPause(ps []*Pause) *Pause {
	held := map[string]int{}
	var main *Pause
	for _, p := range ps {
		if p == nil {
			continue
		}
		held[p.ID]++
	}
	for _, p := range ps {
		if p == nil {
			continue
		}
		if main == nil || held[p.ID] > held[main.ID] || held[p.ID] == held[main.ID] &&
			(p.At.After(main.At) || p.At.Equal(main.At) && p.ID < main.ID) {
			main = p
		}
	}
	return main
}

// route moves each job of a partitioned queue to its partition.
func (c *Client) route(ctx context.Context, js []*ledger.NewJob) error {
	if len(js) == 1 && c.parts.unpartitioned(js[0].Queue) {
		return nil // the common single enqueue: nothing to read nor route
	}
	counts, err := c.partitions(ctx, js)
	if err != nil {
		return err
	}
	for _, j := range js {
		p := counts[j.Queue]
		if p <= 1 {
			continue
		}
		// A job without a partition key goes where its unique key says, so
		// a duplicate meets the job it duplicates; else where its
		// concurrency limit's key (or its rate limit's) says, so every job
		// of the key meets the same permits and starts.
		key := j.PartitionKey
		switch {
		case key != "":
		case j.Unique != nil:
			key = "unique:" + j.Unique.Digest
		case j.Flow != nil && j.Flow.LimitKey != "":
			key = "limit:" + j.Flow.LimitKey
		case j.Flow != nil:
			key = "rate:" + j.Flow.RateKey
		}
		n := uint64(0)
		if spread(j) {
			n = c.parts.spread.Add(1)
		}
		// An id naming its operation id (ledger.OpJobID) is unique within
		// the logical queue only while the operation id lives in one
		// partition, but it can be in two: given with two partition keys,
		// with a unique key, or enqueued again after a layout change. A
		// partition's job gets a random id instead (and an operation key).
		if j.OperationID != "" && j.ID == ledger.OpJobID(j.Queue, j.OperationID) {
			j.ID = uuid.NewString()
		}
		j.Queue = ledger.PartitionNames(j.Queue, p)[ledger.RoutePartition(p, key, j.OperationID, n)]
	}
	return nil
}

// spread reports whether route spreads job j of a partitioned queue: it
// has no partition, unique, limit or rate key nor an operation id, so any
// partition of its queue may hold it.
func spread(j *ledger.NewJob) bool {
	return j.PartitionKey == "" && j.Unique == nil && j.Flow == nil && j.OperationID == ""
}

// rerouteUnsent moves each spread job of js that was not written (out[i]
// nil, by a call that wrote nothing) to the first partition of its
// queue's layout, after its own, that is not in failed, which it adds the
// job's partition to; it returns the positions of the jobs moved.
func (c *Client) rerouteUnsent(js []*ledger.NewJob, out []*ledger.Inserted, failed map[string]bool) []int {
	for i, j := range js {
		if out[i] == nil {
			failed[j.Queue] = true
		}
	}
	var moved []int
	for i, j := range js {
		if out[i] != nil || !ledger.IsPartition(j.Queue) || !spread(j) {
			continue
		}
		c.parts.mu.Lock()
		p := c.parts.counts[ledger.Logical(j.Queue)].p
		c.parts.mu.Unlock()
		names := ledger.PartitionNames(ledger.Logical(j.Queue), p)
		at := slices.Index(names, j.Queue) // -1: not of the layout read last
		for k := 1; k <= len(names); k++ {
			if n := names[(at+k+len(names))%len(names)]; !failed[n] {
				j.Queue = n
				moved = append(moved, i)
				break
			}
		}
	}
	return moved
}

// unpartitioned reports whether queue q's count, read within
// PartitionRefresh, says it has no partitions.
func (pc *partitionCache) unpartitioned(q string) bool {
	pc.mu.Lock()
	cp, ok := pc.counts[q]
	pc.mu.Unlock()
	return ok && cp.p <= 1 && time.Since(cp.at) <= PartitionRefresh
}

// partitions returns the partition counts of js's queues, reading those
// not read within PartitionRefresh from the registry (one call).
func (c *Client) partitions(ctx context.Context, js []*ledger.NewJob) (map[string]int, error) {
	pc := &c.parts
	pc.mu.Lock()
	if pc.counts == nil {
		pc.counts = map[string]cachedPartitions{}
		pc.spread.Store(rand.Uint64())
	}
	out := make(map[string]int, 1)
	var stale []string
	now := time.Now()
	for _, j := range js {
		if _, done := out[j.Queue]; done {
			continue
		}
		cp, ok := pc.counts[j.Queue]
		out[j.Queue] = cp.p
		if !ok || now.Sub(cp.at) > PartitionRefresh {
			stale = append(stale, j.Queue)
		}
	}
	pc.mu.Unlock()
	if len(stale) == 0 {
		return out, nil
	}
	ps, err := c.ledger.PartitionsOf(ctx, stale...)
	if err != nil {
		for _, q := range stale {
			if out[q] == 0 { // never read: the job's partition is unknown
				return nil, fmt.Errorf("%w: reading queue %s's partitions: %w", ErrNotSent, q, err)
			}
		}
		if pc.failing.CompareAndSwap(false, true) {
			c.log.Warn("reading the partition registry failed; routing by the counts read before (logged once until a read succeeds)", "error", err)
		}
		return out, nil
	}
	if pc.failing.Swap(false) {
		c.log.Info("the partition registry is readable again")
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(pc.counts) > maxCachedQueues {
		clear(pc.counts)
	}
	for i, q := range stale {
		out[q] = ps[i]
		pc.counts[q] = cachedPartitions{p: ps[i], at: now}
	}
	return out, nil
}

// maxCachedQueues bounds the partition counts a client keeps.
const maxCachedQueues = 4096

// MaxLayoutChanges bounds the layout changes kept per queue: the newest.
const MaxLayoutChanges = ledger.MaxLayoutChanges

// PartitionChange is one change of a queue's partition count: when (by
// Redis's clock), who (operator:<actor>), why, and the counts before and
// after (Inspector.PartitionChanges).
//
// go doc github.com/fencedq/fencedq/internal/ledger.PartitionChange lists its fields.
type PartitionChange = ledger.PartitionChange

// PartitionChanges returns the recorded changes of queue q's partition
// count (Client.SetPartitions), newest first, at most MaxLayoutChanges.
func (in *Inspector) PartitionChanges(ctx context.Context, q string) ([]PartitionChange, error) {
	if err := in.queue(q); err != nil {
		return nil, err
	}
	if ledger.IsPartition(q) {
		return nil, invalid("%s is a partition: ask for its queue %s", q, ledger.Logical(q))
	}
	return in.l.PartitionChanges(ctx, q)
}

// Partition describes one partition of a queue (Inspector.Partitions).
type Partition struct {
	// Name is the partition's queue name ("q#k" or "q#k.s"; the queue's
	// own name for its jobs from before it had partitions).
	Name string `json:"name"`
	// Index is the partition's number in the queue's current layout, -1
	// for a partition of an earlier layout (draining, or kept for its
	// finished jobs).
	Index int `json:"index"`
	// Slot is the Redis Cluster hash slot of its keys.
	Slot int `json:"slot"`
	// Master is the address of the server holding its keys.
	Master string `json:"master,omitempty"`
	// Counts are its jobs per state.
	Counts map[State]int64 `json:"counts"`
	// Paused is who paused it, nil when it runs.
	Paused *Pause `json:"paused,omitempty"`
	// Unreachable is why its counts and pause could not be read (its
	// master down, most likely; Counts is then nil); empty when they were.
	Unreachable string `json:"unreachable,omitempty"`
}

// QueueLayout is a queue's partitions (Inspector.Partitions).
type QueueLayout struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// Count is the registered partition count (1: no partitions).
	Count int `json:"count"`
	// Partitions are the current layout's partitions and those of
	// earlier layouts still listed (Index -1).
	Partitions []Partition `json:"partitions"`
}

// Partitions returns queue q's registered partition count and, for each
// queue name holding q's jobs (the current layout's partitions first, then
// earlier layouts' still listed in the queue registry), its slot, master,
// job counts and pause. When some names could not be read but others
// could, it returns the layout with those names' Unreachable set and an
// error matching ErrPartial.
func (in *Inspector) Partitions(ctx context.Context, q string) (*QueueLayout, error) {
	if err := in.queue(q); err != nil {
		return nil, err
	}
	if ledger.IsPartition(q) {
		return nil, invalid("%s is a partition: ask for its queue %s", q, ledger.Logical(q))
	}
	ps, err := in.l.PartitionsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	names, err := in.physical(ctx, q)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for k, n := range ledger.PartitionNames(q, ps[0]) {
		index[n] = k
	}
	counts, err := in.l.CountsOf(ctx, names)
	if err != nil {
		return nil, err
	}
	sums, _, _, err := in.l.Summaries(ctx, names, nil)
	if err != nil {
		return nil, err
	}
	out := &QueueLayout{Queue: q, Count: ps[0]}
	partial := false
	for i, n := range names {
		k, ok := index[n]
		if !ok {
			k = -1
		}
		part := Partition{Name: n, Index: k, Slot: ledger.Slot(n), Counts: counts[i].Jobs, Paused: sums[i].Paused}
		if part.Master, err = in.l.Master(ctx, n); err != nil {
			return nil, err
		}
		if err := cmp.Or(counts[i].Err, sums[i].Err); err != nil {
			part.Counts, part.Paused, part.Unreachable, partial = nil, nil, err.Error(), true
		}
		out.Partitions = append(out.Partitions, part)
	}
	sort.SliceStable(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		if (a.Index < 0) != (b.Index < 0) {
			return a.Index >= 0
		}
		return a.Index < b.Index
	})
	if partial {
		return out, ErrPartial
	}
	return out, nil
}

// physical returns the queue names holding queue q's jobs: q's partitions
// (see ledger.Physical), or q alone for a partition's or a plain queue's
// name.
func (in *Inspector) physical(ctx context.Context, q string) ([]string, error) {
	return physical(ctx, in.l, q)
}

func physical(ctx context.Context, l *ledger.Ledger, q string) ([]string, error) {
	if ledger.IsPartition(q) {
		return []string{q}, nil
	}
	ps, err := l.PartitionsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return ledger.Physical(q, ps[0], qs), nil
}

// knownPartition checks that partition name belongs to its queue: to the
// queue's layout, or to an earlier one still listed in the registry. A
// mistyped name fails with ErrInvalid.
func knownPartition(ctx context.Context, l *ledger.Ledger, name string) error {
	names, err := physical(ctx, l, ledger.Logical(name))
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return invalid("queue %s has no partition %s (fencedq partitions --queue %s lists them)", ledger.Logical(name), name, ledger.Logical(name))
	}
	return nil
}

// notFoundIn refines err, a job's action or read under queue name q: a
// job not found under a partition's name its queue has in no layout (a
// mistyped one) fails with ErrInvalid, as the queue's reads do. The name
// is checked only once the job was not found, so a found job costs
// nothing more.
func notFoundIn(ctx context.Context, l *ledger.Ledger, q string, err error) error {
	if !errors.Is(err, ErrNotFound) || !ledger.IsPartition(q) {
		return err
	}
	if kerr := knownPartition(ctx, l, q); errors.Is(kerr, ErrInvalid) {
		return kerr
	}
	return err
}

// registryMissed is the *PartialError of a read of queue q that could not
// read the registries naming q's partitions (err): it names them q#*.
func registryMissed(q string, err error) *PartialError {
	return &PartialError{Unreachable: []string{q + "#*"}, Err: err}
}

// locate returns the queue name (q or one of its partitions) holding job
// id, or an error matching ErrNotFound: one pipelined round trip over the
// names, whatever their number. A partition that could not be read (its
// master down) does not hide the job from the others; found in none of
// those read, the error is a *PartialError (the job may be on one not
// read), not ErrNotFound. When the registries naming q's partitions could
// not be read (on Redis Cluster, their master down), the job is looked for
// under q itself (a queue without partitions, or a partitioned queue's
// jobs from before it had any): found there, it is q's; else the error is
// a *PartialError naming q's partitions (q#*), not ErrNotFound.
func locate(ctx context.Context, l *ledger.Ledger, q, id string) (string, error) {
	names, err := physical(ctx, l, q)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		has, herr := l.HoldJob(ctx, []string{q}, id)
		if herr == nil && has[0] {
			return q, nil
		}
		pe := registryMissed(q, err)
		if herr != nil {
			pe.Unreachable = append([]string{q}, pe.Unreachable...)
		}
		return "", fmt.Errorf("job %s is not in queue %s's own name, and its partitions could not be read: %w", ledger.ShownID(id), q, pe)
	}
	if len(names) == 1 {
		return names[0], nil
	}
	has, err := l.HoldJob(ctx, names, id)
	var pe *PartialError
	if err != nil && !errors.As(err, &pe) {
		return "", err
	}
	for i, n := range names {
		if has[i] {
			return n, nil
		}
	}
	if pe != nil {
		return "", fmt.Errorf("job %s is in none of queue %s's partitions read: %w", ledger.ShownID(id), q, pe)
	}
	return "", fmt.Errorf("%w: %s in queue %s", ErrNotFound, ledger.ShownID(id), q)
}
