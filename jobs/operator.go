package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/fencedq/fencedq/internal/fenceout"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/lease"
)

// Limits on what an operator action records (Cancel, RunNow, Pause,
// Resume, Resolve, SetPartitions, RemoveSchedule): the operator's name is 1-200 bytes of UTF-8 without
// control characters (surrounding spaces are trimmed); the note is at most
// 2000 bytes of UTF-8 whose only control characters are line feeds and
// tabs. Anything else is rejected with an error matching ErrInvalid before
// anything is written.
const (
	MaxActorLen = 200
	MaxNoteLen  = 2000
)

// operator checks an operator's name and note and returns the actor string
// recorded with the action.
func (c *Client) operator(queue, actor, note string) (string, error) {
	if err := c.err(); err != nil {
		return "", err
	}
	if err := ledger.ValidateQueueRef(queue); err != nil {
		return "", err
	}
	return operatorName(actor, note)
}

// operatorName checks an operator's name and note and returns the actor
// string recorded with the action.
func operatorName(actor, note string) (string, error) {
	if err := ValidateActor(actor); err != nil {
		return "", err
	}
	if err := ValidateNote(note); err != nil {
		return "", err
	}
	return ledger.OperatorPrefix + strings.TrimSpace(actor), nil
}

// Resolve applies an operator's decision (DecideSucceeded, DecideRerun or
// DecideDead) to a job in review or uncertain (or dead or cancelled, for a
// re-run), with who decided and why, and returns the job as it left it
// (as the other operator actions do: read again, or, when that read fails,
// only its queue, id and new state; the action stands either way). A re-run is due at once and its next
// attempt gets a new, higher token, so the old attempt stays fenced out.
// A step of a cancelled workflow (workflow.Cancel) never runs again: its
// re-run from review or uncertain (the verdict "not applied") ends it
// cancelled, and from dead or cancelled fails with ErrWrongState.
func (c *Client) Resolve(ctx context.Context, queue, id string, d Decision, actor, note string) (*Record, error) {
	return c.resolve(ctx, queue, id, nil, d, actor, note)
}

// Seen is what an operator's decision was made on (Client.ResolveSeen,
// Client.CancelSeen, Client.RunNowSeen):
// the job's state, token and run count as a page or a listing showed them.
type Seen struct {
	// State is the state the job was seen in.
	State State
	// Token is the token it held (Record.Token: its last attempt's; 0
	// before its first claim), unless AnyToken.
	Token lease.Token
	// Runs is the run count it had (Record.Runs: how many times an
	// operator re-ran it), checked with Token: a job cancelled and re-run
	// since it was seen, never claimed in between, is back in State with
	// Token, yet another operator decided on it.
	Runs int
	// AnyToken leaves the token and the run count unchecked: the decision
	// stands for any attempt in State (a bulk action over the jobs a
	// filter selected).
	AnyToken bool
}

// ResolveSeen is Resolve for a decision made on what the operator saw (a
// dashboard page, a filtered list): it applies only while the job is
// still in seen.State and, unless seen.AnyToken, holds seen.Token and
// seen.Runs. A job that moved on since (re-run and claimed again, resolved
// or cancelled by someone else, re-run and cancelled again) fails with an
// error matching ErrWrongState and nothing is written, so a decision about
// one attempt never lands on a newer one.
func (c *Client) ResolveSeen(ctx context.Context, queue, id string, seen Seen, d Decision, actor, note string) (*Record, error) {
	if !seen.State.Valid() {
		return nil, invalid("unknown state %q", seen.State)
	}
	return c.resolve(ctx, queue, id, &seen, d, actor, note)
}

func (c *Client) resolve(ctx context.Context, queue, id string, seen *Seen, d Decision, actor, note string) (*Record, error) {
	switch d {
	case DecideSucceeded, DecideRerun, DecideDead:
	default:
		return nil, invalid("an operator decides succeeded, rerun or dead, not %q", d)
	}
	who, err := c.operator(queue, actor, note)
	if err != nil {
		return nil, err
	}
	from := []State{Review, Uncertain}
	if d == DecideRerun {
		from = append(from, Dead, Cancelled)
	}
	r := ledger.Resolution{From: from, Decision: d, Actor: who, Note: note}
	if seen != nil {
		if !slices.Contains(from, seen.State) {
			return nil, fmt.Errorf("%w: job %s was seen %s, which %s does not apply to", ErrWrongState, id, seen.State, d)
		}
		r.From = []State{seen.State}
		if !seen.AnyToken {
			r.Seen, r.SeenRuns = &seen.Token, &seen.Runs
		}
	}
	if queue, err = locate(ctx, c.ledger, queue, id); err != nil {
		return nil, err
	}
	if d != DecideSucceeded {
		if err := c.fenceOut(ctx, queue, id, &r); err != nil {
			return nil, err
		}
		if c.afterRead != nil {
			c.afterRead()
		}
	}
	st, err := c.ledger.Decide(ctx, queue, id, r)
	if err != nil {
		return nil, notFoundIn(ctx, c.ledger, queue, err)
	}
	return c.readBack(ctx, queue, id, st), nil
}

// fenceOut reads job id before an operator's decision r that its last
// attempt did not apply its operation (a rerun or dead) by a client given
// Config.Fencer (none: it does nothing), and holds r to that read: the
// job's state, token and run count. A job in uncertain or review has its
// last attempt cut off from the store first (its outcome is unknown, and it
// may still be running), and r then lands only on that attempt, still in
// uncertain or review; a dead or cancelled job needs no fence, and r lands
// only while it stays as read. So a job that moved between the read and
// the decision (re-run and claimed again, its attempt's lease lapsed,
// decided by another operator) fails with ErrWrongState, nothing written,
// rather than taking a "not applied" about an attempt never fenced out. A
// job r does not apply to fails at once with ErrWrongState, as the
// decision would have.
func (c *Client) fenceOut(ctx context.Context, queue, id string, r *ledger.Resolution) error {
	if c.fencer == nil {
		return nil
	}
	rec, err := c.ledger.Get(ctx, queue, id)
	if err != nil {
		return notFoundIn(ctx, c.ledger, queue, err)
	}
	if !slices.Contains(r.From, rec.State) {
		// Not left to the decision's write: the job may reach a state r
		// applies to before it, on an attempt never fenced out.
		return fmt.Errorf("%w: job %s is %s", ErrWrongState, id, rec.State)
	}
	if r.Seen != nil && *r.Seen != rec.Token || r.SeenRuns != nil && *r.SeenRuns != rec.Runs {
		return nil // moved on from what the operator saw: r fails on it
	}
	r.Seen, r.SeenRuns = &rec.Token, &rec.Runs
	if rec.State != Uncertain && rec.State != Review {
		r.From = []State{rec.State}
		return nil
	}
	r.From = slices.DeleteFunc(slices.Clone(r.From), func(s State) bool { return s != Uncertain && s != Review })
	if err := fenceout.Attempt(ctx, rec, c.fencer, c.leases, r.Actor); err != nil {
		return fmt.Errorf("%w: job %s (token %d): %w; nothing was decided", ErrNotFencedOut, id, rec.Token, err)
	}
	return nil
}

// readBack returns job id of queue as an operator action that applied
// left it, read again. The action stands whatever the read does: when it
// fails (a lost connection, the caller's deadline) it is logged and the
// Record holds only the job's queue, id and state, the state the action
// reported, rather than an error that would say nothing happened.
func (c *Client) readBack(ctx context.Context, queue, id string, state State) *Record {
	rec, err := c.ledger.Get(ctx, queue, id)
	if err != nil {
		c.log.WarnContext(ctx, "reading a job back after an operator action failed; the action stands",
			"queue", queue, "job_id", id, "state", string(state), "error", err)
		return &Record{ID: id, Queue: queue, State: state}
	}
	return rec
}

// Cancel cancels a job on behalf of an operator: a pending (due or
// scheduled) job, or a workflow step waiting for its dependencies, becomes
// cancelled, a final state; a running job's handler is asked to stop
// through its context and its outcome is still committed by its token
// (see Ledger.Cancel). Other states fail with ErrWrongState.
func (c *Client) Cancel(ctx context.Context, queue, id, actor, note string) (*Record, error) {
	return c.cancel(ctx, queue, id, nil, actor, note)
}

// CancelSeen is Cancel for a decision made on what the operator saw (as
// ResolveSeen): it applies only while the job is still in seen.State
// (pending, waiting or running) and, unless seen.AnyToken, holds
// seen.Token and seen.Runs. A job that moved on since (a scheduled job
// that started running, a pending retry claimed again, a job cancelled and
// re-run by others) fails with an error matching ErrWrongState and
// nothing is written.
func (c *Client) CancelSeen(ctx context.Context, queue, id string, seen Seen, actor, note string) (*Record, error) {
	return c.cancel(ctx, queue, id, &seen, actor, note)
}

func (c *Client) cancel(ctx context.Context, queue, id string, seen *Seen, actor, note string) (*Record, error) {
	who, err := c.operator(queue, actor, note)
	if err != nil {
		return nil, err
	}
	ls, err := seenFor(id, seen, "cancel", Pending, Waiting, Running)
	if err != nil {
		return nil, err
	}
	if queue, err = locate(ctx, c.ledger, queue, id); err != nil {
		return nil, err
	}
	st, err := c.ledger.CancelSeen(ctx, queue, id, ls, who, note)
	if err != nil {
		return nil, notFoundIn(ctx, c.ledger, queue, err)
	}
	return c.readBack(ctx, queue, id, st), nil
}

// RunNow makes a scheduled job due at once on behalf of an operator
// (recorded in its history with who and why). A job already due (a
// run-now sent twice, a retry after a lost reply) fails with ErrWrongState
// saying so, keeps its place in the queue and nothing is recorded, so the
// action is recorded once. Only pending jobs qualify; others fail with
// ErrWrongState, as does a job held back by its concurrency limit or rate
// limit (parked or deferred: see Limiter), which keeps its place.
func (c *Client) RunNow(ctx context.Context, queue, id, actor, note string) (*Record, error) {
	return c.runNow(ctx, queue, id, nil, actor, note)
}

// RunNowSeen is RunNow for a decision made on what the operator saw (as
// ResolveSeen): it applies only while the job is still in seen.State
// (pending) and, unless seen.AnyToken, holds seen.Token and seen.Runs. A
// job that moved on since fails with an error matching ErrWrongState and
// nothing is written.
func (c *Client) RunNowSeen(ctx context.Context, queue, id string, seen Seen, actor, note string) (*Record, error) {
	return c.runNow(ctx, queue, id, &seen, actor, note)
}

func (c *Client) runNow(ctx context.Context, queue, id string, seen *Seen, actor, note string) (*Record, error) {
	who, err := c.operator(queue, actor, note)
	if err != nil {
		return nil, err
	}
	ls, err := seenFor(id, seen, "run now", Pending)
	if err != nil {
		return nil, err
	}
	if queue, err = locate(ctx, c.ledger, queue, id); err != nil {
		return nil, err
	}
	if err := c.ledger.RunNowSeen(ctx, queue, id, ls, who, note); err != nil {
		return nil, notFoundIn(ctx, c.ledger, queue, err)
	}
	return c.readBack(ctx, queue, id, Pending), nil
}

// seenFor checks what an operator saw (nil: nothing) against the states
// action takes and returns the ledger's check.
func seenFor(id string, seen *Seen, action string, takes ...State) (ledger.Seen, error) {
	if seen == nil {
		return ledger.Seen{}, nil
	}
	if !seen.State.Valid() {
		return ledger.Seen{}, invalid("unknown state %q", seen.State)
	}
	if !slices.Contains(takes, seen.State) {
		return ledger.Seen{}, fmt.Errorf("%w: job %s was seen %s, which %s does not apply to", ErrWrongState, id, seen.State, action)
	}
	ls := ledger.Seen{State: seen.State}
	if !seen.AnyToken {
		ls.Token, ls.Runs = &seen.Token, &seen.Runs
	}
	return ls, nil
}

// Pause stops pools from claiming queue's jobs until Resume; running
// attempts finish and enqueues are still accepted. It reports whether the
// queue was running before. A partitioned queue's partitions are paused
// one by one (each its own slot); a partition that cannot be reached (its
// master down) does not keep the others from being paused: the call then
// fails with a *PartialError naming those not paused (call it again once
// they are back). Partitions a concurrent SetPartitions adds are
// paused too. The queue is added to the namespace's queue
// registry first, so a paused queue is listed (Inspector.Queues, the
// CLI, the dashboard) even before it holds a job. A partition's name
// pauses that partition alone; a name the queue has no partition of (in
// its layout or an earlier one) fails with ErrInvalid, nothing written.
func (c *Client) Pause(ctx context.Context, queue, actor, note string) (bool, error) {
	return c.setPaused(ctx, queue, true, nil, actor, note)
}

// Resume lets pools claim queue's jobs again and wakes idle ones. It
// reports whether the queue was paused before. In durable mode
// (Config.Durability) a partition's change too few replicas acknowledged
// counts as made (it applied on the primary), and the call then fails
// with an error matching ErrActionUnknown, as does Pause's. Of a partitioned queue, a
// partition that cannot be reached does not keep the others paused, as
// for Pause.
func (c *Client) Resume(ctx context.Context, queue, actor, note string) (bool, error) {
	return c.setPaused(ctx, queue, false, nil, actor, note)
}

// ResumeSeen is Resume for an operator who saw the queue paused by the
// pause of id pauseID (Pause.ID, as Inspector.Paused or a dashboard page
// showed it; "" for a pause recorded without an id): a queue resumed and
// paused again since, by another pause, stays paused and the call fails
// with an error matching ErrWrongState, so ending one incident's pause
// never ends the next one's. Of a partitioned queue, it resumes every
// partition the pause seen holds and leaves paused those another pause
// holds (a partition paused on its own before its queue was); it fails
// only when the pause seen holds none of them any more.
func (c *Client) ResumeSeen(ctx context.Context, queue, pauseID, actor, note string) (bool, error) {
	return c.setPaused(ctx, queue, false, &pauseID, actor, note)
}

// setPaused pauses queue's partitions under a new pause id, or resumes
// them: every pause when seen is nil, else only the pause of id *seen.
func (c *Client) setPaused(ctx context.Context, queue string, paused bool, seen *string, actor, note string) (bool, error) {
	who, err := c.operator(queue, actor, note)
	if err != nil {
		return false, err
	}
	if ledger.IsPartition(queue) {
		// Registered by a pause, a mistyped partition would be listed and
		// polled by every pool, and show its queue paused.
		if err := knownPartition(ctx, c.ledger, queue); err != nil {
			return false, err
		}
	}
	names, err := physical(ctx, c.ledger, queue)
	if err != nil {
		return false, err
	}
	pauseID := ""
	if paused {
		// Listed before it is paused: a paused queue nobody can see (a
		// mistyped name) would hold back jobs enqueued to it later.
		if err := c.ledger.RegisterQueues(ctx, names...); err != nil {
			return false, err
		}
		pauseID = uuid.NewString() // one for every partition
	}
	changed := false
	var other error         // a partition held by another pause than the one seen
	var failed PartialError // the partitions the action did not reach
	var unacked error       // the first change too few replicas acknowledged (applied on the primary)
	done := make(map[string]bool, len(names))
	for pending := names; len(pending) > 0; {
		for _, n := range pending {
			done[n] = true
			var ch bool
			switch {
			case paused:
				ch, err = c.ledger.PauseAs(ctx, n, pauseID, who, note)
			case seen != nil:
				ch, err = c.ledger.ResumeIf(ctx, n, *seen, who, note)
				if errors.Is(err, ErrWrongState) {
					// it stays paused; the pause seen still ends on the others
					other, err = cmp.Or(other, err), nil
				}
			default:
				ch, err = c.ledger.SetPaused(ctx, n, false, who, note)
			}
			if errors.Is(err, ErrActionUnknown) {
				unacked, err = cmp.Or(unacked, err), nil
			}
			if err != nil {
				if ctx.Err() != nil {
					return changed, err
				}
				// Not reached (its master down, most likely): the others
				// still are, so an outage does not keep a pause from them.
				failed.Unreachable = append(failed.Unreachable, n)
				failed.Err = cmp.Or(failed.Err, err)
				continue
			}
			changed = changed || ch
		}
		// Partitions a layout change added since they were read
		// (SetPartitions, which read them before, checks again too).
		if names, err = physical(ctx, c.ledger, queue); err != nil {
			return changed, err
		}
		pending = slices.DeleteFunc(names, func(n string) bool { return done[n] })
	}
	switch {
	case len(failed.Unreachable) == len(done):
		return changed, failed.Err
	case len(failed.Unreachable) > 0:
		return changed, &failed
	case other != nil && !changed:
		return false, other // the pause seen held no partition: it ended before
	}
	return changed, unacked
}

// RemoveSchedule deletes periodic schedule id's record and its ticks (a
// schedule whose definition changed without a ScheduleID left its old
// record behind). It reports whether the schedule existed. While live
// pools still define the schedule (with periodic jobs enabled) it is
// refused with an error matching ErrScheduleConflict that names them:
// their leader would record it again at once, its history lost. Like the
// other operator actions it records who removed it and why (actor and
// note, checked before anything is written) in the same write as the
// removal: the namespace keeps its newest MaxScheduleRemovals removals
// (Inspector.ScheduleRemovals).
func (c *Client) RemoveSchedule(ctx context.Context, id, actor, note string) (bool, error) {
	if err := c.err(); err != nil {
		return false, err
	}
	if err := ValidateScheduleID(id); err != nil {
		return false, err
	}
	who, err := operatorName(actor, note)
	if err != nil {
		return false, err
	}
	return c.ledger.RemoveSchedule(ctx, id, who, note)
}

// MaxScheduleRemovals bounds the schedule removals a namespace keeps: the
// newest.
const MaxScheduleRemovals = ledger.MaxScheduleRemovals

// ScheduleRemoval is an operator's removal of a schedule
// (Client.RemoveSchedule): the schedule's id, kind and queue, when (by
// Redis's clock), who (operator:<actor>) and why.
//
// go doc github.com/fencedq/fencedq/internal/ledger.ScheduleRemoval lists its fields.
type ScheduleRemoval = ledger.ScheduleRemoval

// ScheduleRemovals returns the namespace's recorded schedule removals,
// newest first, at most MaxScheduleRemovals.
func (in *Inspector) ScheduleRemovals(ctx context.Context) ([]ScheduleRemoval, error) {
	if err := in.err(); err != nil {
		return nil, err
	}
	return in.l.ScheduleRemovals(ctx)
}
