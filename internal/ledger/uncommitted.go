package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// UncommittedActor cancels the steps of a workflow whose enqueue never
// committed it (AbandonUncommitted): its record's CancelledBy and, after
// "cancelled by ", its steps' reason.
const UncommittedActor = "maintenance:never committed"

// uncommittedBatch bounds the workflow parts one AbandonUncommitted call
// looks at per queue.
const uncommittedBatch = 1000

// part is what wf_enqueue.lua notes of the steps a part call wrote.
type part struct {
	Home string   `json:"home"`
	IDs  []string `json:"ids"`
}

// AbandonUncommitted settles the workflows whose steps of other queues
// were written (wf_enqueue.lua's part calls) before before, but whose home
// commit never came (the client died between the calls, or a part call
// failed): such steps wait for a record nothing will write. For each, it
// writes a record in the home queue holding the steps found, cancelled by
// UncommittedActor (so an enqueue retried with the same operation id now
// returns that workflow, cancelled, and never commits it late), then
// cancels the steps (reason "cancelled by maintenance:never committed",
// in each step's history). The parts of committed workflows are
// forgotten, after their steps the record does not list (see
// cancelStrays) are cancelled likewise, and so are those none of whose steps still waits (a workflow
// that finished and expired within the grace). A part note that does not
// parse (edited by hand) is set aside (see setAside). Three pipelined round trips
// (four with notes to set aside) look at up to uncommittedBatch parts per queue; a workflow to abandon has
// its parts in the other queues of qs read by id too, so its record lists
// all its steps even when a queue's batch stopped short of its part there.
// It returns the ids of the workflows it abandoned.
func (l *Ledger) AbandonUncommitted(ctx context.Context, qs []string, before time.Time) ([]string, error) {
	max := "(" + strconv.FormatInt(before.UnixMilli(), 10)
	pipe := l.rdb.Pipeline()
	found := make([]*redis.StringSliceCmd, len(qs))
	for i, q := range qs {
		found[i] = pipe.ZRangeByScore(ctx, l.prefix(q)+"wf_parts", &redis.ZRangeBy{Min: "-inf", Max: max, Count: uncommittedBatch})
	}
	_, _ = pipe.Exec(ctx) // read per command below
	type where struct {
		q, id string
		p     *redis.StringCmd
	}
	var parts []where
	var errs []error
	pipe = l.rdb.Pipeline()
	for i, c := range found {
		if err := c.Err(); err != nil {
			errs = append(errs, wrap("workflow parts of "+qs[i], err))
			continue
		}
		for _, id := range c.Val() {
			parts = append(parts, where{q: qs[i], id: id, p: pipe.HGet(ctx, l.prefix(qs[i])+"wf_part", id)})
		}
	}
	if len(parts) == 0 {
		return nil, errors.Join(errs...)
	}
	_, _ = pipe.Exec(ctx)
	// each workflow's parts, and whether its home holds a record
	type wf struct {
		home   string
		steps  []StepRef
		qs     []string
		notes  map[string]string // queue → its part note as read
		record *redis.SliceCmd
	}
	byID := map[string]*wf{}
	var order []string
	var corrupt []corruptPart
	for _, w := range parts {
		var p part
		raw, err := w.p.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			errs = append(errs, wrap("workflow part "+w.id+" of "+w.q, err))
			continue
		}
		if err == nil {
			if err := json.Unmarshal([]byte(raw), &p); err != nil {
				corrupt = append(corrupt, corruptPart{q: w.q, id: w.id, raw: raw, err: err})
				continue
			}
		}
		x := byID[w.id]
		if x == nil {
			x = &wf{home: p.Home, notes: map[string]string{}}
			byID[w.id] = x
			order = append(order, w.id)
		}
		if x.home == "" {
			x.home = p.Home
		}
		x.qs = append(x.qs, w.q)
		x.notes[w.q] = raw
		for _, id := range p.IDs {
			x.steps = append(x.steps, StepRef{Queue: w.q, ID: id})
		}
	}
	if err := l.setAside(ctx, corrupt); err != nil {
		errs = append(errs, err)
	}
	pipe = l.rdb.Pipeline()
	for _, id := range order {
		if x := byID[id]; x.home != "" && ValidateQueueRef(x.home) == nil {
			x.record = pipe.HMGet(ctx, l.workflowKey(x.home, id), "def", "cancel")
		}
	}
	_, _ = pipe.Exec(ctx)
	// no record, or one abandon wrote (a pass that stopped before its
	// cancels): abandoned; any other record is the commit's
	uncommitted := func(x *wf) bool {
		return x.record != nil && x.record.Err() == nil && (x.record.Val()[0] == nil || x.record.Val()[1] == UncommittedActor)
	}
	var abandoned []string
	forget := l.rdb.Pipeline()
	for _, id := range order {
		x := byID[id]
		if x.record != nil && x.record.Err() != nil {
			errs = append(errs, wrap("read workflow "+id, x.record.Err()))
			continue
		}
		var def any // the committed record's definition; nil: none
		switch {
		case x.record != nil && !uncommitted(x):
			def = x.record.Val()[0]
		case uncommitted(x) && x.record.Val()[0] == nil:
			// A retry after the home queue's partition count changed
			// committed in another partition than the one noted.
			var err error
			if def, err = l.committedElsewhere(ctx, id, x.home); err != nil {
				errs = append(errs, err) // the next pass tries again
				continue
			}
		}
		if def == nil && uncommitted(x) {
			more, steps, err := l.otherParts(ctx, id, x.steps, qs, x.qs)
			if err != nil {
				errs = append(errs, err) // not abandoned with part of its steps: the next pass tries again
				continue
			}
			x.qs, x.steps = append(x.qs, slices.Collect(maps.Keys(more))...), append(x.steps, steps...)
			maps.Copy(x.notes, more)
			done, err := l.abandon(ctx, id, x.home, x.steps, x.notes)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if done {
				abandoned = append(abandoned, id)
			}
		} else if def != nil {
			if err := l.cancelStrays(ctx, id, def, x.steps); err != nil {
				errs = append(errs, err) // the next pass tries again
				continue
			}
		}
		for _, q := range x.qs { // unless noted anew since (a re-submission)
			forgetPartScript.Eval(ctx, forget, []string{l.prefix(q) + "wf_part", l.prefix(q) + "wf_parts"}, id, x.notes[q])
		}
	}
	if _, err := forget.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		errs = append(errs, wrap("forget workflow parts", err))
	}
	return abandoned, errors.Join(errs...)
}

// forgetPartScript forgets the part note of workflow ARGV 1 in a queue
// (its hash first, then its index entry: a part left in the index alone
// reads as none), only while it is still ARGV 2, the note as read: one a
// re-submission noted anew since (wf_enqueue.lua's revive) is kept for a
// later pass.
var forgetPartScript = luafunc.NewPlain(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and cur ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`)

// errPartChanged is a step of a workflow never committed that abandon
// leaves alone: its part note changed since abandon read it (a
// re-submission revived the workflow meanwhile).
var errPartChanged = errors.New("the workflow's part note changed")

// committedElsewhere returns the definition of workflow id's record when
// a home queue other than noted (the one its part notes name) holds it,
// committed; nil when none does. The home of a workflow on a partitioned
// queue is its partition in the layout of the try that committed, so a
// retry after the queue's partition count changed commits in another
// partition than the failed try's notes name: its steps are the committed
// workflow's, and must not be abandoned.
func (l *Ledger) committedElsewhere(ctx context.Context, id, noted string) (any, error) {
	home, err := l.FindWorkflow(ctx, id)
	if err != nil || home == "" || home == noted {
		return nil, err
	}
	rec, err := l.rdb.HMGet(ctx, l.workflowKey(home, id), "def", "cancel").Result()
	if err != nil {
		return nil, wrap("read workflow "+id, err)
	}
	if rec[0] == nil || rec[1] == UncommittedActor {
		return nil, nil
	}
	return rec[0], nil
}

// cancelStrays cancels the steps of committed workflow id (its record's
// definition def) that a part call wrote but the definition does not list,
// those still waiting: another enqueue of the workflow's operation id,
// with another graph, wrote them before its commit found the workflow
// committed (concurrently, or a retry of a try that never committed
// enqueued another graph). Nothing would ever start them. A definition
// that does not parse is logged, and its notes are forgotten.
func (l *Ledger) cancelStrays(ctx context.Context, id string, def any, steps []StepRef) error {
	raw, _ := def.(string)
	var d WorkflowDef
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		// Failing would fail every pass and keep the notes for ever: its
		// strays, if any, are left to an operator.
		l.cfg.Logger.Error("a committed workflow's record does not parse: its stray steps, if any, are not cancelled",
			"workflow", id, "error", err)
		return nil
	}
	listed := make(map[StepRef]bool, len(d.Steps))
	for _, s := range d.Steps {
		listed[StepRef{Queue: s.Queue, ID: s.ID}] = true
	}
	steps = slices.DeleteFunc(slices.Clone(steps), func(s StepRef) bool { return listed[s] })
	if len(steps) == 0 {
		return nil
	}
	states, err := l.stepStates(ctx, steps)
	if err != nil {
		return err
	}
	for i, s := range steps {
		if states[i] != Waiting {
			continue
		}
		_, err := l.CancelStep(ctx, s.Queue, s.ID, UncommittedActor, "its workflow was committed by another enqueue, without it")
		if err != nil && !errors.Is(err, ErrWrongState) && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// otherParts returns the queues of qs other than found in which workflow
// id noted a part (a queue whose batch of parts stopped short of it), each
// with its note as read, and the steps those parts list, so that its record lists, and its cancels
// reach, every step it wrote. It reads no part when none of steps (those
// found) waits: the workflow is then not abandoned (see abandon).
func (l *Ledger) otherParts(ctx context.Context, id string, steps []StepRef, qs, found []string) (map[string]string, []StepRef, error) {
	states, err := l.stepStates(ctx, steps)
	if err != nil {
		return nil, nil, err
	}
	if !slices.Contains(states, Waiting) {
		return nil, nil, nil
	}
	var others []string
	for _, q := range qs {
		if !slices.Contains(found, q) {
			others = append(others, q)
		}
	}
	parts := make([]*redis.StringCmd, len(others))
	_, err = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range others {
			parts[i] = p.HGet(ctx, l.prefix(q)+"wf_part", id)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, wrap("workflow "+id+"'s parts", err)
	}
	more := map[string]string{}
	var moreSteps []StepRef
	var corrupt []corruptPart
	for i, c := range parts {
		if errors.Is(c.Err(), redis.Nil) {
			continue
		}
		var pt part
		if err := json.Unmarshal([]byte(c.Val()), &pt); err != nil {
			corrupt = append(corrupt, corruptPart{q: others[i], id: id, raw: c.Val(), err: err})
			continue
		}
		more[others[i]] = c.Val()
		for _, sid := range pt.IDs {
			moreSteps = append(moreSteps, StepRef{Queue: others[i], ID: sid})
		}
	}
	if err := l.setAside(ctx, corrupt); err != nil {
		return nil, nil, err
	}
	return more, moreSteps, nil
}

// corruptPart is a part note that does not parse (edited by hand): raw,
// workflow id's in queue q.
type corruptPart struct {
	q, id, raw string
	err        error
}

// setAside takes corrupt part notes out of their queues' index of parts
// (wf_parts), in one pipelined round trip, each only while its note is
// still as read, and logs each at error level: the pass reads them no
// more (a batch of them would otherwise fill every pass's batch and fail
// it), so each is logged once (one in another queue than the pass found
// its workflow in, out of that queue's index, is read again only while
// that workflow is abandoned). The note is left in wf_part for an operator
// to read and remove; the steps it names, if any, are not abandoned.
func (l *Ledger) setAside(ctx context.Context, cs []corruptPart) error {
	if len(cs) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	out := make([]*redis.Cmd, len(cs))
	for i, c := range cs {
		p := l.prefix(c.q)
		out[i] = setAsidePartScript.Eval(ctx, pipe, []string{p + "wf_part", p + "wf_parts"}, c.id, c.raw)
	}
	_, _ = pipe.Exec(ctx) // read per command below
	var errs []error
	for i, c := range cs {
		n, err := out[i].Int()
		if err != nil {
			errs = append(errs, wrap("set aside workflow part "+c.id+" of "+c.q, err))
			continue
		}
		if n == 1 {
			l.cfg.Logger.Error("a workflow's part note does not parse: set aside (out of wf_parts, kept in wf_part for an operator to remove); the steps it names, if any, are not abandoned",
				"queue", c.q, "workflow", ShownID(c.id), "error", c.err)
		}
	}
	return errors.Join(errs...)
}

// setAsidePartScript takes workflow ARGV 1 out of a queue's index of parts
// (KEYS 2) while its note (KEYS 1) is still ARGV 2, the corrupt note as
// read, and then reports 1; a note written anew since (a retried part
// call) stays, for a later pass (0).
var setAsidePartScript = luafunc.NewPlain(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`)

// abandon writes the record of workflow id, never committed, in its home
// queue and cancels its steps; done is false when the workflow was
// committed (nothing is written). notes are its part notes as read, per
// queue: a step whose queue's note changed since is not cancelled (a
// re-submission revived the workflow meanwhile, and commits it). A step of a workflow never committed
// waits until it is cancelled, so when none of steps waits any more (all
// finished or expired: a workflow committed, finished and expired before
// the grace) there is nothing to abandon.
func (l *Ledger) abandon(ctx context.Context, id, home string, steps []StepRef, notes map[string]string) (done bool, err error) {
	type read struct {
		h     *redis.SliceCmd
		waits *redis.StringSliceCmd
	}
	rs := make([]read, len(steps))
	_, err = l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range steps {
			rs[i] = read{h: p.HMGet(ctx, l.JobKey(s.Queue, s.ID), "step", "kind", "state"),
				waits: p.SMembers(ctx, l.JobKey(s.Queue, s.ID)+":waits")}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, wrap("read workflow "+id+"'s steps", err)
	}
	def := WorkflowDef{}
	waiting := false
	for i, s := range steps {
		name, _ := rs[i].h.Val()[0].(string)
		kind, _ := rs[i].h.Val()[1].(string)
		if name == "" {
			continue // expired
		}
		if st, _ := rs[i].h.Val()[2].(string); State(st) == Waiting {
			waiting = true
		}
		var deps []string
		for _, d := range rs[i].waits.Val() {
			if d != StartDep {
				deps = append(deps, d)
			}
		}
		sort.Strings(deps)
		def.Steps = append(def.Steps, StepDef{Name: name, Queue: s.Queue, ID: s.ID, Kind: kind, Deps: deps})
	}
	if !waiting {
		return false, nil
	}
	rec, err := json.Marshal(def)
	if err != nil {
		return false, wrap("abandon workflow "+id, err)
	}
	p := l.prefix(home)
	// durable like the cancels below: the next pass abandons again (the
	// record it finds says so) what the replicas did not acknowledge
	r, err := l.durableWrite(ctx, abandonScript, []string{l.workflowKey(home, id), p + "workflows", p + "wf_open", p + changedKey},
		id, rec, UncommittedActor, changedMember(home, id))
	v, _ := r.(string)
	if err != nil {
		return false, wrap("abandon workflow "+id, err)
	}
	if v != "abandoned" {
		return false, nil
	}
	for _, s := range def.Steps {
		_, err := l.cancelNoted(ctx, s.Queue, s.ID, UncommittedActor, "its workflow's enqueue never committed it", "wf", Seen{}, notes[s.Queue])
		if err != nil && !errors.Is(err, ErrWrongState) && !errors.Is(err, ErrNotFound) && !errors.Is(err, errPartChanged) {
			return false, err
		}
	}
	return true, nil
}

// abandonScript writes the record of a workflow never committed, unless
// its commit wrote one ('committed'); one it wrote before is kept. A key
// of another type fails it before its first write (ErrForeignKey).
var abandonScript = luafunc.NewPlain(keyGuardLua + `
key_guard(KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'set', KEYS[4], 'set')
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'cancel') == ARGV[3] then return 'abandoned' end
  return 'committed'
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', KEYS[1], 'def', ARGV[2], 'created', now, 'op', '', 'cancel', ARGV[3])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[4])
return 'abandoned'`)
