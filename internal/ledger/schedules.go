package ledger

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/lease"
)

// The periodic scheduler's records. The reconciler's leader registers the
// schedules of its pool and enqueues their ticks; these records say what it
// did, for the CLI and the dashboard, and where the next leader resumes.
// Keys, for namespace ns (all in the {periodic} hash slot):
//
//	ns:{periodic}:leader              string: highest leader token seen by a schedule write
//	ns:{periodic}:schedules           set: schedule ids
//	ns:{periodic}:schedule:<id>       hash: the schedule (see Schedule)
//	ns:{periodic}:schedule:<id>:ticks list: the newest ticks enqueued (see Tick), newest first
//
// Every write is one script call that checks the leader's token against
// the high-water key first: a deposed leader's write is refused with an
// error matching ErrStale.

// PeriodicOperationPrefix starts the operation id of every periodic tick:
// "periodic:<schedule id>:<tick time>" (see PeriodicOperationID).
const PeriodicOperationPrefix = "periodic:"

// MaxScheduleIDLen bounds a schedule id.
const MaxScheduleIDLen = 100

var scheduleIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// ValidateScheduleID checks a schedule id: 1-100 letters, digits or ._-
// (no colon, so a tick's operation id splits unambiguously).
func ValidateScheduleID(id string) error {
	if !scheduleIDRE.MatchString(id) {
		return invalid("schedule id %q must be 1-%d letters, digits or ._-", Clip(id), MaxScheduleIDLen)
	}
	return nil
}

// PeriodicOperationID is the operation id of schedule id's tick at t:
// "periodic:<id>:<t in UTC, RFC 3339 with as many fractional digits as
// needed>". Every leader computes the same id for the same tick, so a tick
// enqueued twice is deduplicated into one job.
func PeriodicOperationID(id string, t time.Time) string {
	return PeriodicOperationPrefix + id + ":" + t.UTC().Format(time.RFC3339Nano)
}

// ParsePeriodicOperationID returns the schedule id and tick time of a
// periodic tick's operation id; ok is false for any other operation id. A
// handler can call it on its job's OperationID to learn which tick it runs.
func ParsePeriodicOperationID(op string) (id string, tick time.Time, ok bool) {
	rest, found := strings.CutPrefix(op, PeriodicOperationPrefix)
	if !found {
		return "", time.Time{}, false
	}
	id, ts, found := strings.Cut(rest, ":")
	if !found || ValidateScheduleID(id) != nil {
		return "", time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "", time.Time{}, false
	}
	return id, t, true
}

// ScheduleSpec is a schedule's definition as the leader's pool registered
// it.
type ScheduleSpec struct {
	// ID names the schedule; its ticks' operation ids derive from it.
	ID string `json:"id"`
	// Schedule is the cron expression, or "@every <duration>".
	Schedule string `json:"schedule"`
	// TimeZone is the zone cron expressions are read in.
	TimeZone string `json:"time_zone"`
	// Kind is the kind of the jobs the ticks enqueue.
	Kind string `json:"kind"`
	// Queue is the queue the ticks are enqueued on.
	Queue string `json:"queue"`
	// CatchUp is the catch-up policy after downtime ("all", "latest", "none").
	CatchUp string `json:"catch_up"`
	// MissedAfter is how late a tick may be enqueued under CatchUp "none".
	MissedAfter time.Duration `json:"missed_after,omitempty"`
	// MaxCatchUp is how many missed ticks one pass enqueues under CatchUp
	// "all" or "none", the newest ones (0: the default, 1000).
	MaxCatchUp int `json:"max_catch_up,omitempty"`
	// JobDigest is a digest of the job each tick enqueues (kind, args,
	// queue and enqueue options); Digest is a digest of the whole
	// definition (JobDigest and the fields above). Two pools define the
	// schedule alike when their Digests are equal.
	JobDigest string `json:"job_digest,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// ScheduleOwner is the pool whose definition of a schedule a registration
// carries: of two definitions of one schedule id, the one of the most
// recently started pool is recorded.
type ScheduleOwner struct {
	// Pool is the pool's worker id.
	Pool string `json:"pool,omitempty"`
	// Started is when the pool started.
	Started time.Time `json:"started,omitzero"`
}

// ScheduleConflict is the newest registration of a schedule whose
// definition differs from the recorded one and lost to it: its pool
// started before the pool that defined the recorded one.
type ScheduleConflict struct {
	ScheduleOwner
	// Digest is the digest of the definition that was not recorded.
	Digest string `json:"digest"`
	// Seen is when that registration was last tried.
	Seen time.Time `json:"seen"`
	// Since is when a registration of this digest first lost to the
	// recorded definition.
	Since time.Time `json:"since,omitzero"`
}

// Schedule is a periodic schedule as the ledger records it.
type Schedule struct {
	ScheduleSpec
	// Owner is the most recently started pool that registered the
	// recorded definition (empty for a record written before owners were
	// recorded).
	Owner ScheduleOwner `json:"owner,omitzero"`
	// Conflict, when set, is the newest registration of another definition
	// that the recorded one won over (see ScheduleConflict). It is cleared
	// when a newer definition is recorded, or by the leader's next pass
	// once no live pool reports the losing definition (or the recorded
	// one: TakeOverSchedule).
	Conflict *ScheduleConflict `json:"conflict,omitempty"`
	// Created is when a leader first registered the schedule: no tick
	// before it is due.
	Created time.Time `json:"created"`
	// Seen is when a leader last registered it (every scheduler pass does):
	// a schedule no pool registers any more keeps its old Seen.
	Seen time.Time `json:"seen"`
	// Cursor is the newest tick handled, enqueued or skipped by the
	// catch-up policy; the next pass looks at ticks after it.
	Cursor time.Time `json:"cursor,omitzero"`
	// LastTick is the newest tick enqueued, and LastJob the job it produced
	// (zero and "" before the first).
	LastTick time.Time `json:"last_tick,omitzero"`
	LastJob  string    `json:"last_job,omitempty"`
	// NextTick is the next tick as of the last pass.
	NextTick time.Time `json:"next_tick,omitzero"`
	// Enqueued counts ticks enqueued (a deduplicated tick counts too: it
	// is recorded with the job that already had its operation id).
	Enqueued int64 `json:"enqueued"`
	// Skipped counts ticks the catch-up policy skipped.
	Skipped int64 `json:"skipped"`
	// Leader is the leader token of the last write.
	Leader lease.Token `json:"leader,string"`
	// Updated is the time of the last tick record.
	Updated time.Time `json:"updated,omitzero"`
}

// Tick is one tick a leader enqueued.
type Tick struct {
	// Time is the tick's scheduled time.
	Time time.Time `json:"time"`
	// JobID is the job the tick produced.
	JobID string `json:"job_id"`
	// Queue is the job's queue.
	Queue string `json:"queue"`
	// Deduplicated is true when the tick's operation id was already known:
	// another leader (or an earlier try) had enqueued it.
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Recorded is when the tick was recorded, and Leader the token of the
	// leader that recorded it.
	Recorded time.Time   `json:"recorded,omitzero"`
	Leader   lease.Token `json:"leader,string"`
}

// OperationID returns the tick's operation id for schedule id.
func (t Tick) OperationID(id string) string { return PeriodicOperationID(id, t.Time) }

//go:embed lua/schedule.lua
var scheduleSrc string

// scheduleScript starts with internal/epoch's library: leader tokens are
// compared as decimal uint64 strings (exact above 2^53, unlike Lua numbers).
var scheduleScript = luafunc.NewPlain(epoch.Lua + scheduleSrc)

// scheduleWrite runs schedule.lua and maps its reply.
func (l *Ledger) scheduleWrite(ctx context.Context, what, id string, args ...any) (time.Time, error) {
	v, err := scheduleScript.Run(ctx, l.rdb, l.scheduleKeys(id), args...).Result()
	r := newReply(what, v, err)
	if err := r.need(2); err != nil {
		return time.Time{}, wrap(what+" "+id, err)
	}
	switch r.int(0) {
	case -1:
		return time.Time{}, fmt.Errorf("%w: %s %s: a newer scheduler leader (token %s) was seen", ErrStale, what, id, r.str(1))
	case -2:
		return time.Time{}, NotFound("schedule " + id)
	case -3:
		return time.Time{}, fmt.Errorf("%w: schedule %s: a more recently started pool's definition is recorded", ErrScheduleConflict, id)
	case -4:
		return time.Time{}, errConflictChanged
	}
	return msTime(r.str(1)), nil
}

// RegisterSchedule records spec on behalf of the scheduler leader holding
// token leader: it creates the schedule (Created = now, by the Redis
// clock) when it is new, else updates its definition, and sets Seen. It
// returns the schedule as recorded. A newer leader's token seen by any
// schedule write makes it fail with an error matching ErrStale.
func (l *Ledger) RegisterSchedule(ctx context.Context, leader lease.Token, spec ScheduleSpec) (*Schedule, error) {
	return l.RegisterScheduleAt(ctx, leader, spec, ScheduleOwner{}, time.Time{})
}

// RegisterScheduleAt is RegisterSchedule for a scheduler pass that reads
// the namespace's time (ServerTime) as now, on behalf of pool by: a new
// schedule is created at now, the clock its ticks are due by, so none of
// them falls before its creation whatever the node's own TIME says (it
// differs by the tenure's offset after a failover), and Seen (and a
// conflict's times) are now too. A zero now is Redis TIME.
//
// When the recorded definition has another Digest and was registered by a
// pool started after by (or at the same time, with a greater digest), it
// is kept: the registration is recorded as the schedule's Conflict, and
// RegisterScheduleAt returns the schedule as recorded with an error
// matching ErrScheduleConflict.
func (l *Ledger) RegisterScheduleAt(ctx context.Context, leader lease.Token, spec ScheduleSpec, by ScheduleOwner, now time.Time) (*Schedule, error) {
	if err := ValidateScheduleID(spec.ID); err != nil {
		return nil, err
	}
	_, werr := l.scheduleWrite(ctx, "register schedule", spec.ID, "register", leader.String(), spec.ID, ms(now),
		spec.Digest, ms(by.Started), by.Pool,
		"schedule", spec.Schedule, "tz", spec.TimeZone, "kind", spec.Kind, "queue", spec.Queue,
		"catch_up", spec.CatchUp, "missed_after", spec.MissedAfter.Milliseconds(), "max_catch_up", spec.MaxCatchUp, "job_digest", spec.JobDigest)
	if werr != nil && !errors.Is(werr, ErrScheduleConflict) {
		return nil, werr
	}
	s, err := l.Schedule(ctx, spec.ID)
	if err != nil {
		return nil, err
	}
	return s, werr
}

// TakeOverSchedule records spec, registered on behalf of pool by, over
// recorded (the schedule as read) whichever pool started last: the
// scheduler leader calls it when no live pool defines the recorded
// definition any more. The conflict is removed with it. It returns nil
// and no error when the recorded definition (digest, pool start) changed
// since recorded was read.
func (l *Ledger) TakeOverSchedule(ctx context.Context, leader lease.Token, spec ScheduleSpec, by ScheduleOwner, recorded *Schedule, now time.Time) (*Schedule, error) {
	if err := ValidateScheduleID(spec.ID); err != nil {
		return nil, err
	}
	_, err := l.scheduleWrite(ctx, "take over schedule", spec.ID, "takeover", leader.String(), spec.ID, ms(now),
		spec.Digest, ms(by.Started), by.Pool, recorded.Digest, ms(recorded.Owner.Started),
		"schedule", spec.Schedule, "tz", spec.TimeZone, "kind", spec.Kind, "queue", spec.Queue,
		"catch_up", spec.CatchUp, "missed_after", spec.MissedAfter.Milliseconds(), "max_catch_up", spec.MaxCatchUp, "job_digest", spec.JobDigest)
	switch {
	case errors.Is(err, errConflictChanged):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return l.Schedule(ctx, spec.ID)
}

// errConflictChanged: the schedule's conflict, or recorded definition, is no
// longer the one read.
var errConflictChanged = errors.New("schedule conflict changed")

// ClearScheduleConflict removes schedule id's conflict, on behalf of the
// scheduler leader holding token leader, when it is still c (same digest,
// same last try): an older pool's registration since then keeps it. It
// reports whether it removed it; a missing schedule is not an error.
func (l *Ledger) ClearScheduleConflict(ctx context.Context, leader lease.Token, id string, c ScheduleConflict) (bool, error) {
	_, err := l.scheduleWrite(ctx, "clear schedule conflict", id, "unconflict", leader.String(), id, c.Digest, ms(c.Seen))
	switch {
	case errors.Is(err, errConflictChanged), errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// TickRecord is what one scheduler pass did for one schedule.
type TickRecord struct {
	// Ticks are the ticks enqueued, oldest first.
	Ticks []Tick
	// Cursor is the newest tick handled (enqueued or skipped).
	Cursor time.Time
	// Skipped counts the ticks the catch-up policy skipped.
	Skipped int
	// Next is the schedule's next tick.
	Next time.Time
	// At is the pass's time (the namespace's time it read), recorded as
	// when the ticks were recorded; zero: Redis TIME.
	At time.Time
}

// RecordTicks records a scheduler pass of schedule id by the leader holding
// token leader. Cursor and LastTick only move forward, so a late record
// from an earlier pass cannot move them back. It fails with an error
// matching ErrStale when a newer leader was seen, and ErrNotFound when the
// schedule was never registered.
func (l *Ledger) RecordTicks(ctx context.Context, id string, leader lease.Token, rec TickRecord) error {
	args := []any{"ticks", leader.String(), id, rec.Skipped, ms(rec.Next), ms(rec.Cursor), ms(rec.At), len(rec.Ticks)}
	for _, t := range rec.Ticks {
		dedup := 0
		if t.Deduplicated {
			dedup = 1
		}
		args = append(args, ms(t.Time), t.JobID, t.Queue, dedup)
	}
	_, err := l.scheduleWrite(ctx, "record ticks", id, args...)
	return err
}

// Schedule returns schedule id's record, or an error matching ErrNotFound.
func (l *Ledger) Schedule(ctx context.Context, id string) (*Schedule, error) {
	h, err := l.rdb.HGetAll(ctx, l.scheduleKeys(id)[2]).Result()
	if err != nil {
		return nil, wrap("schedule "+id, err)
	}
	if len(h) == 0 {
		return nil, NotFound("schedule " + id)
	}
	return scheduleFrom(id, h), nil
}

func scheduleFrom(id string, h map[string]string) *Schedule {
	n := func(k string) int64 { v, _ := strconv.ParseInt(h[k], 10, 64); return v }
	var conflict *ScheduleConflict
	if h["conflict_digest"] != "" {
		conflict = &ScheduleConflict{ScheduleOwner: ScheduleOwner{Pool: h["conflict_pool"], Started: msTime(h["conflict_started"])},
			Digest: h["conflict_digest"], Seen: msTime(h["conflict_seen"]), Since: msTime(h["conflict_since"])}
	}
	return &Schedule{
		ScheduleSpec: ScheduleSpec{ID: id, Schedule: h["schedule"], TimeZone: h["tz"], Kind: h["kind"],
			Queue: h["queue"], CatchUp: h["catch_up"], MissedAfter: time.Duration(n("missed_after")) * time.Millisecond,
			MaxCatchUp: int(n("max_catch_up")),
			JobDigest:  h["job_digest"], Digest: h["digest"]},
		Owner:    ScheduleOwner{Pool: h["pool"], Started: msTime(h["started"])},
		Conflict: conflict,
		Created:  msTime(h["created"]), Seen: msTime(h["seen"]), Cursor: msTime(h["cursor"]),
		LastTick: msTime(h["last_tick"]), LastJob: h["last_job"], NextTick: msTime(h["next_tick"]),
		Enqueued: n("enqueued"), Skipped: n("skipped"), Leader: token(h["leader"]), Updated: msTime(h["updated"]),
	}
}

// Schedules returns every recorded schedule, sorted by id.
func (l *Ledger) Schedules(ctx context.Context) ([]*Schedule, error) {
	ids, err := l.rdb.SMembers(ctx, l.periodicPrefix()+"schedules").Result()
	if err != nil {
		return nil, wrap("schedules", err)
	}
	sort.Strings(ids)
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, l.scheduleKeys(id)[2])
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap("schedules", err)
		}
	}
	out := make([]*Schedule, 0, len(ids))
	for i, id := range ids {
		if h := cmds[i].Val(); len(h) > 0 {
			out = append(out, scheduleFrom(id, h))
		}
	}
	return out, nil
}

// ScheduleTicks returns up to n of schedule id's most recently recorded
// ticks (the ledger keeps 100), newest record first.
func (l *Ledger) ScheduleTicks(ctx context.Context, id string, n int) ([]Tick, error) {
	if n <= 0 {
		return nil, nil
	}
	raw, err := l.rdb.LRange(ctx, l.scheduleKeys(id)[3], 0, int64(n-1)).Result()
	if err != nil {
		return nil, wrap("schedule ticks "+id, err)
	}
	out := make([]Tick, 0, len(raw))
	for _, s := range raw {
		var e struct {
			Tick, Job, Queue, Dedup, At, Leader string
		}
		if json.Unmarshal([]byte(s), &e) != nil {
			continue
		}
		out = append(out, Tick{Time: msTime(e.Tick), JobID: e.Job, Queue: e.Queue, Deduplicated: e.Dedup == "1",
			Recorded: msTime(e.At), Leader: token(e.Leader)})
	}
	return out, nil
}

// MaxScheduleRemovals bounds the schedule removals kept (the newest).
const MaxScheduleRemovals = 50

// ScheduleRemoval is an operator's removal of a schedule's record.
type ScheduleRemoval struct {
	// ID, Kind and Queue are the removed schedule's.
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// At is when it was removed, by Redis's clock.
	At time.Time `json:"at"`
	// Actor is who removed it (operator:<name>) and Note why.
	Actor string `json:"actor"`
	Note  string `json:"note,omitempty"`
}

// removeScheduleScript deletes a schedule's record (KEYS 2) and ticks
// (KEYS 3), drops it from the ids (KEYS 1) and, when it existed, records
// the removal (KEYS 4, newest first, capped). ARGV: id, actor, note, cap,
// the removal's time in ms (the namespace's time). Reply: 1 when it existed.
// A key of another type fails it before its first write (ErrForeignKey).
var removeScheduleScript = luafunc.NewPlain(keyGuardLua + `
key_guard(KEYS[1], 'set', KEYS[2], 'hash', KEYS[3], 'list', KEYS[4], 'list')
redis.call('SREM', KEYS[1], ARGV[1])
local def = redis.call('HMGET', KEYS[2], 'kind', 'queue')
if redis.call('DEL', KEYS[2], KEYS[3]) == 0 then return 0 end
redis.call('LPUSH', KEYS[4], cjson.encode({id = ARGV[1], kind = def[1] or '', queue = def[2] or '',
  at = ARGV[5], actor = ARGV[2], note = ARGV[3]}))
redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[4]) - 1)
return 1
`)

// RemoveSchedule deletes schedule id's record and ticks (an operator
// action for a schedule no pool registers any more). It reports whether
// it existed, and records who removed it and why (ScheduleRemovals). It
// is refused with an error matching ErrScheduleConflict,
// naming them, while live pools still tick the schedule when they lead:
// their leader would record it again at once, its history lost. (A pool
// starting during the removal may still record it anew.)
func (l *Ledger) RemoveSchedule(ctx context.Context, id, actor, note string) (bool, error) {
	pools, err := l.Pools(ctx)
	if err != nil {
		return false, wrap("remove schedule "+id, err)
	}
	var defining []string
	for _, p := range pools {
		if slices.Contains(p.Schedules, id) {
			defining = append(defining, p.ID)
		}
	}
	if len(defining) > 0 {
		sort.Strings(defining)
		return false, fmt.Errorf("%w: schedule %s is still defined by live pools %s: remove it from their periodic jobs first",
			ErrScheduleConflict, id, strings.Join(defining, ", "))
	}
	// Read, not recorded: a removal that finds nothing writes nothing (a
	// mistyped namespace gets no clock record).
	now, err := l.ReadTime(ctx)
	if err != nil {
		return false, wrap("remove schedule "+id, err)
	}
	k := l.scheduleKeys(id)
	v, err := l.durableWrite(ctx, removeScheduleScript, []string{k[1], k[2], k[3], l.scheduleRemovalsKey()},
		id, actor, note, MaxScheduleRemovals, ms(now))
	v, ack, err := unacked(v, err)
	if err != nil {
		return false, wrap("remove schedule "+id, err)
	}
	if v != int64(1) {
		return false, nil // nothing found, nothing written
	}
	return true, actionErr("remove schedule "+id, ack)
}

// ScheduleRemovals returns the namespace's recorded schedule removals,
// newest first (at most MaxScheduleRemovals).
func (l *Ledger) ScheduleRemovals(ctx context.Context) ([]ScheduleRemoval, error) {
	raw, err := l.rdb.LRange(ctx, l.scheduleRemovalsKey(), 0, MaxScheduleRemovals-1).Result()
	if err != nil {
		return nil, wrap("schedule removals", err)
	}
	out := make([]ScheduleRemoval, 0, len(raw))
	for _, s := range raw {
		var e struct {
			ID, Kind, Queue, At, Actor, Note string
		}
		if json.Unmarshal([]byte(s), &e) != nil {
			continue
		}
		out = append(out, ScheduleRemoval{ID: e.ID, Kind: e.Kind, Queue: e.Queue, At: msTime(e.At), Actor: e.Actor, Note: e.Note})
	}
	return out, nil
}
