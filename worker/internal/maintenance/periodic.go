package maintenance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// Catch-up policies of a periodic schedule (the values recorded in
// jobs.ScheduleSpec.CatchUp).
const (
	CatchUpLatest = "latest"
	CatchUpAll    = "all"
	CatchUpNone   = "none"
)

// PeriodicBatch bounds how many ticks of one schedule one enqueue call
// carries; a schedule further behind is caught up batch by batch within
// the same pass.
const PeriodicBatch = 100

// maxScan bounds how many ticks one walk goes through for one schedule
// (a long downtime of a schedule ticking every second); the pass walks on
// from there. It is above MaxMaxCatchUp.
const maxScan = 100_000

// DefaultMaxCatchUp is how many missed ticks a schedule under CatchUpAll
// or CatchUpNone enqueues after a downtime when its MaxCatchUp is not
// set: the newest ones; the older ones are skipped.
const DefaultMaxCatchUp = 1000

// MaxMaxCatchUp is the largest MaxCatchUp a schedule may set.
const MaxMaxCatchUp = 10_000

// Periodic is one registered schedule, as the periodic service runs it
// (worker.PeriodicJob compiled).
type Periodic struct {
	// Spec is what the ledger records about the schedule; Spec.Queue must
	// be the queue Options enqueue on.
	Spec jobs.ScheduleSpec
	// Next returns the first tick strictly after t (zero: none).
	Next func(t time.Time) time.Time
	// MissedAfter is how late a tick may be enqueued under CatchUpNone.
	MissedAfter time.Duration
	// MaxCatchUp bounds how many due ticks one pass enqueues under
	// CatchUpAll and CatchUpNone: the newest ones; the older ones are
	// skipped. Zero is DefaultMaxCatchUp.
	MaxCatchUp int
	// Args and Options are enqueued at each tick (the operation id is set
	// by the service).
	Args    jobs.JobArgs
	Options []jobs.Option
}

// maxCatchUp is p's MaxCatchUp, DefaultMaxCatchUp when unset, capped at
// MaxMaxCatchUp (a recorded definition is not validated by this pool).
func (p Periodic) maxCatchUp() int {
	switch {
	case p.MaxCatchUp <= 0:
		return DefaultMaxCatchUp
	case p.MaxCatchUp > MaxMaxCatchUp:
		return MaxMaxCatchUp
	}
	return p.MaxCatchUp
}

// periodic enqueues the due ticks of the pool's schedules.
type periodic struct {
	service
	interval  time.Duration
	client    *jobs.Client
	schedules []Periodic
	owner     ledger.ScheduleOwner
	parse     func(expr, zone string) (func(time.Time) time.Time, error)
	// warned holds, by schedule id, the recorded digest of a conflict
	// already logged, so a conflict is logged once, not at every pass.
	warned map[string]string
	// conflicted holds the schedules whose conflict a live pool still
	// holds (fencedq_schedule_conflicts counts them); pools caches one
	// pass's read of the live pools.
	conflicted map[string]bool
	pools      []ledger.PoolInfo
}

// runOnce enqueues every schedule's due ticks. The clock is Redis's, so
// leaders on machines whose clocks disagree agree on which ticks are due.
// A schedule that fails is logged and counted and the others go on.
func (s *periodic) runOnce(ctx context.Context, leader lease.Token) error {
	now, err := s.ledger.ServerTime(ctx)
	if err != nil {
		return err
	}
	s.pools = nil
	defer func() { s.metrics.ScheduleConflicts.Set(float64(len(s.conflicted))) }()
	for _, p := range s.schedules {
		if err := s.safeTick(ctx, leader, p, now); err != nil {
			if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
				return err
			}
			s.failed(ctx, "periodic schedule pass failed", "schedule", p.Spec.ID, "error", err)
		}
	}
	return nil
}

// safeTick is tick with a panic (in a Schedule's Next, in the args'
// Validate or MarshalJSON) turned into that schedule's error, so one
// poison schedule cannot stop the others' ticks.
func (s *periodic) safeTick(ctx context.Context, leader lease.Token, p Periodic, now time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return s.tick(ctx, leader, p, now)
}

// tick handles schedule p's ticks due at now: register, enqueue (each tick
// with its own operation id, so a tick enqueued twice is one job), record.
// A crash or a lost leadership between the enqueue and the record is safe:
// the next pass enqueues the same ticks again and is deduplicated.
//
// When a more recently started pool recorded another definition of the
// schedule, tick runs by that definition if this pool can build it (same
// job, a schedule expression it parses), else skips the schedule; either
// way it logs one warning until the conflict ends. When no live pool
// defines the recorded definition any more, it records p's (takeOver).
func (s *periodic) tick(ctx context.Context, leader lease.Token, p Periodic, now time.Time) error {
	sched, err := s.ledger.RegisterScheduleAt(ctx, leader, p.Spec, s.owner, now) // created by the clock ticks are due by
	switch {
	case errors.Is(err, jobs.ErrScheduleConflict):
		taken, err := s.takeOver(ctx, leader, p, sched, now)
		if err != nil {
			return err
		}
		if taken != nil {
			sched = taken
			delete(s.warned, p.Spec.ID)
			delete(s.conflicted, p.Spec.ID)
			break
		}
		s.conflicted[p.Spec.ID] = true // this pool's definition lost
		var ok bool
		if p, ok = s.recorded(p, sched); !ok {
			return nil
		}
	case err != nil:
		return err
	default:
		delete(s.warned, p.Spec.ID)
		if err := s.settle(ctx, leader, sched); err != nil {
			return err
		}
	}
	// Only a newer leader stops the pass here: the queue's own slot may be
	// down while the slots its ticks go to are up (a partitioned queue's
	// name holds none of its partitions' jobs), and the enqueue says.
	if err := s.ledger.Lead(ctx, p.Spec.Queue, leader); errors.Is(err, jobs.ErrStale) {
		return err
	}
	cursor := sched.Cursor
	if cursor.IsZero() || cursor.Before(sched.Created) {
		cursor = sched.Created // no tick before the schedule existed
	}
	for {
		due, skipped, beyond, next, handled, err := dueTicks(p, cursor, now)
		if err != nil {
			return err
		}
		if handled.IsZero() {
			// Nothing due: keep the next tick current for readers.
			if !next.Equal(sched.NextTick) {
				return s.ledger.RecordTicks(ctx, p.Spec.ID, leader, ledger.TickRecord{Next: next, At: now})
			}
			return nil
		}
		if beyond > 0 {
			s.log.Warn("periodic ticks skipped: more missed ticks than the schedule catches up", "schedule", p.Spec.ID,
				"catch_up", p.Spec.CatchUp, "max_catch_up", p.maxCatchUp(), "skipped", beyond)
		}
		if skipped > beyond {
			s.log.Info("periodic ticks skipped by the catch-up policy", "schedule", p.Spec.ID,
				"catch_up", p.Spec.CatchUp, "skipped", skipped-beyond)
		}
		// The ticks go in batches of PeriodicBatch, each recorded (the
		// cursor moved to its newest tick) before the next is enqueued.
		for first := true; first || len(due) > 0; first = false {
			batch := due[:min(len(due), PeriodicBatch)]
			due = due[len(batch):]
			rec := ledger.TickRecord{Cursor: handled, Next: next, At: now}
			if first {
				rec.Skipped = skipped
			}
			if len(due) > 0 {
				rec.Cursor, rec.Next = batch[len(batch)-1], due[0]
			}
			if err := s.enqueueTicks(ctx, p, batch, &rec); err != nil {
				return err
			}
			if err := s.ledger.RecordTicks(ctx, p.Spec.ID, leader, rec); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		if !next.After(now) {
			cursor = handled // more ticks due: walk on
			continue
		}
		return nil
	}
}

// enqueueTicks enqueues schedule p's ticks due (at most PeriodicBatch) in
// one call, each with its own operation id, and adds them to rec.
func (s *periodic) enqueueTicks(ctx context.Context, p Periodic, due []time.Time, rec *ledger.TickRecord) error {
	if len(due) == 0 {
		return nil
	}
	earlier := s.enqueuedBefore(ctx, p, due)
	ps := make([]jobs.Params, 0, len(due))
	for i, t := range due {
		if earlier[i] != nil {
			continue
		}
		opts := append(append([]jobs.Option(nil), p.Options...), jobs.OperationID(jobs.PeriodicOperationID(p.Spec.ID, t)))
		ps = append(ps, jobs.Params{Args: p.Args, Options: opts})
	}
	var res []*jobs.Result
	if len(ps) > 0 {
		var err error
		if res, err = s.client.EnqueueMany(ctx, ps); err != nil {
			return err
		}
	}
	for i := range due {
		r := earlier[i]
		if r == nil {
			r, res = res[0], res[1:]
		}
		rec.Ticks = append(rec.Ticks, jobs.Tick{Time: due[i], JobID: r.JobID, Queue: r.Queue, Deduplicated: r.Deduplicated})
		if r.Deduplicated {
			s.log.Info("periodic tick already enqueued", "schedule", p.Spec.ID, "tick", due[i], "job_id", r.JobID)
		} else {
			s.log.Debug("periodic tick enqueued", "schedule", p.Spec.ID, "tick", due[i], "job_id", r.JobID)
		}
	}
	return nil
}

// enqueuedBefore returns, for each tick of due, the job an earlier pass
// enqueued for it into a partition of an earlier layout of p's queue (nil
// when none). An operation id deduplicates within one layout only: a pass
// that enqueued a tick but did not record it (a crash, a lost leadership,
// the schedules' slot down) leaves it to the next pass, whose enqueue may
// route it to another partition once the count changed. Only the names
// outside the current layout are looked at (the enqueue deduplicates
// within it), one round trip per tick when there are any; what cannot be
// read (the registry or a partition's master down) is not waited for.
func (s *periodic) enqueuedBefore(ctx context.Context, p Periodic, due []time.Time) []*jobs.Result {
	out := make([]*jobs.Result, len(due))
	q := p.Spec.Queue
	counts, err := s.ledger.PartitionsOf(ctx, q)
	if err != nil {
		return out
	}
	registered, err := s.ledger.Queues(ctx)
	if err != nil {
		return out
	}
	current := ledger.PartitionNames(q, counts[0])
	var names []string
	for _, n := range ledger.Physical(q, counts[0], registered) {
		if !slices.Contains(current, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return out
	}
	for i, t := range due {
		if r, err := s.ledger.FindOperation(ctx, names, jobs.PeriodicOperationID(p.Spec.ID, t)); err == nil {
			out[i] = &jobs.Result{JobID: r.ID, Queue: ledger.Logical(r.Queue), OperationID: r.OperationID, Deduplicated: true, Partition: r.Queue}
		}
	}
	return out
}

// settle keeps sched's conflict while a live pool reports the losing
// definition (or lists the schedule without digests), and clears it once
// none does: the older pools left or were upgraded.
func (s *periodic) settle(ctx context.Context, leader lease.Token, sched *ledger.Schedule) error {
	c := sched.Conflict
	if c == nil {
		delete(s.conflicted, sched.ID)
		return nil
	}
	pools, err := s.livePools(ctx)
	if err != nil {
		return err
	}
	if defines(pools, sched.ID, c.Digest) {
		s.conflicted[sched.ID] = true
		return nil
	}
	cleared, err := s.ledger.ClearScheduleConflict(ctx, leader, sched.ID, *c)
	if err != nil {
		return err
	}
	delete(s.conflicted, sched.ID)
	if cleared {
		s.log.Info("periodic schedule conflict over: no live pool defines it otherwise any more",
			"schedule", sched.ID, "conflict_pool", c.Pool, "conflict_since", c.Since)
	}
	return nil
}

// takeOver records p's definition over sched's when no live pool defines
// the recorded one any more (the more recently started pools that did
// left): the remaining pools would otherwise skip the schedule, or keep a
// conflict, for ever. The owner recorded is the most recently started live
// pool defining it as p does. It returns nil when a live pool may still
// define the recorded one, when the live pools read do not include this
// pool (heartbeats not written yet, or lapsed: not a list to trust), or
// when the record changed meanwhile.
func (s *periodic) takeOver(ctx context.Context, leader lease.Token, p Periodic, sched *ledger.Schedule, now time.Time) (*ledger.Schedule, error) {
	pools, err := s.livePools(ctx)
	if err != nil || defines(pools, sched.ID, sched.Digest) ||
		!slices.ContainsFunc(pools, func(o ledger.PoolInfo) bool { return o.ID == s.owner.Pool }) {
		return nil, err
	}
	by := s.owner
	for _, o := range pools {
		if o.ScheduleDigests[p.Spec.ID] == p.Spec.Digest && o.Started.After(by.Started) {
			by = ledger.ScheduleOwner{Pool: o.ID, Started: o.Started}
		}
	}
	taken, err := s.ledger.TakeOverSchedule(ctx, leader, p.Spec, by, sched, now)
	if taken != nil {
		s.log.Info("periodic schedule definition taken over: no live pool defines the recorded one any more",
			"schedule", p.Spec.ID, "recorded_by", sched.Owner.Pool, "recorded_pool_started", sched.Owner.Started,
			"recorded_schedule", sched.Schedule, "schedule_expr", p.Spec.Schedule, "owner", by.Pool)
	}
	return taken, err
}

// livePools returns the live pools, read once per pass.
func (s *periodic) livePools(ctx context.Context) ([]ledger.PoolInfo, error) {
	if s.pools == nil {
		pools, err := s.ledger.Pools(ctx)
		if err != nil {
			return nil, err
		}
		s.pools = pools
	}
	return s.pools, nil
}

// defines reports whether a pool of pools may define schedule id by digest:
// it reports that digest, or lists the schedule without digests.
func defines(pools []ledger.PoolInfo, id, digest string) bool {
	for _, p := range pools {
		if d, ok := p.ScheduleDigests[id]; slices.Contains(p.Schedules, id) && (!ok || d == digest) {
			return true
		}
	}
	return false
}

// recorded returns p run by sched's recorded definition, and whether this
// pool can build it; it logs the conflict once per recorded definition.
func (s *periodic) recorded(p Periodic, sched *ledger.Schedule) (Periodic, bool) {
	q := p
	q.Spec = sched.ScheduleSpec
	q.MissedAfter = sched.MissedAfter
	q.MaxCatchUp = sched.MaxCatchUp
	var why error
	switch {
	case sched.JobDigest == "" || sched.JobDigest != p.Spec.JobDigest:
		why = errors.New("its job (kind, args or enqueue options) differs from this pool's")
	case s.parse == nil:
		why = errors.New("this pool cannot parse schedule expressions")
	case sched.CatchUp != CatchUpLatest && sched.CatchUp != CatchUpAll && sched.CatchUp != CatchUpNone,
		sched.CatchUp == CatchUpNone && sched.MissedAfter <= 0:
		why = fmt.Errorf("catch-up policy %q, missed-after %v", sched.CatchUp, sched.MissedAfter)
	default:
		q.Next, why = s.parse(sched.Schedule, sched.TimeZone)
	}
	if s.warned[p.Spec.ID] != sched.Digest {
		s.warned[p.Spec.ID] = sched.Digest
		args := []any{"schedule", p.Spec.ID, "recorded_by", sched.Owner.Pool, "recorded_pool_started", sched.Owner.Started,
			"recorded_schedule", sched.Schedule, "own_schedule", p.Spec.Schedule, "pool_started", s.owner.Started}
		if why != nil {
			s.log.Warn("periodic schedule skipped: a more recently started pool defines it otherwise and this pool cannot run that definition",
				append(args, "reason", why.Error())...)
		} else {
			s.log.Warn("periodic schedule defined otherwise by a more recently started pool: ticking by its definition", args...)
		}
	}
	return q, why == nil
}

// dueTicks walks p's ticks after cursor up to now and applies the
// catch-up policy: due are the ticks to enqueue (oldest first, at most
// p's MaxCatchUp), skipped how many walked ticks the policy drops, beyond
// how many of those it drops only for being older than the newest
// MaxCatchUp (CatchUpAll, CatchUpNone), handled the newest tick walked
// (zero when none was due) and next the first tick after it. It fails,
// walking nothing, when the schedule's Next does not move forward.
//
// One call walks at most maxScan ticks. A walk stopped short of now
// enqueues nothing: it skips the ticks walked before the newest MaxCatchUp
// it kept, and returns those kept as next, so the following call walks
// them again and keeps those still among the newest.
func dueTicks(p Periodic, cursor, now time.Time) (due []time.Time, skipped, beyond int, next, handled time.Time, err error) {
	limit := p.maxCatchUp()
	var before time.Time // the newest tick walked and not kept
	t, err := nextTick(p, cursor)
	for n := 0; err == nil && !t.IsZero() && !t.After(now) && n < maxScan; n++ {
		handled = t
		switch p.Spec.CatchUp {
		case CatchUpAll, CatchUpNone:
			if p.Spec.CatchUp == CatchUpNone && now.Sub(t) > p.MissedAfter {
				skipped++
				before = t
				break
			}
			if len(due) == limit {
				// The oldest kept tick is not among the newest limit:
				// skipped.
				before = due[0]
				due = due[1:]
				skipped++
				beyond++
			}
			due = append(due, t)
		default: // CatchUpLatest
			if len(due) > 0 {
				skipped++
			}
			due = append(due[:0], t)
		}
		t, err = nextTick(p, t)
	}
	if err != nil {
		return nil, 0, 0, time.Time{}, time.Time{}, err
	}
	if !t.IsZero() && !t.After(now) && len(due) > 0 {
		// The walk stopped at maxScan short of now: the ticks kept may not
		// be the newest.
		if (p.Spec.CatchUp == CatchUpAll || p.Spec.CatchUp == CatchUpNone) && !before.IsZero() {
			// Walk them again: everything before them is skipped (there is
			// such a tick: maxScan is above any MaxCatchUp).
			return nil, skipped, beyond, due[0], before, nil
		}
		skipped += len(due) // CatchUpLatest: the tick kept is not the latest
		due = nil
	}
	return due, skipped, beyond, t, handled, nil
}

// nextTick is p's first tick after t, in whole milliseconds as the ledger
// keeps ticks and cursors: a tick between two milliseconds is taken at the
// next one, so the cursor recorded is the tick itself, the next pass starts
// after it, and the operation id recorded with the tick is its job's. A
// Next that returns a time not after t (a custom Schedule rounding instead
// of truncating, say) is an error: walking on would repeat that tick
// forever.
func nextTick(p Periodic, t time.Time) (time.Time, error) {
	n := p.Next(t)
	if n.IsZero() {
		return n, nil
	}
	if !n.After(t) {
		return time.Time{}, fmt.Errorf("schedule %s: Next(%s) returned %s, not after it",
			p.Spec.Schedule, t.UTC().Format(time.RFC3339Nano), n.UTC().Format(time.RFC3339Nano))
	}
	if r := n.Truncate(time.Millisecond); r.Before(n) {
		n = r.Add(time.Millisecond)
	}
	return n, nil
}
