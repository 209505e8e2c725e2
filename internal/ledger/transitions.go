package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/scriptbatch"
	"github.com/fencedq/fencedq/lease"
)

// Claimed is one job a claim started an attempt on.
type Claimed struct {
	ID          string
	Queue       string
	Token       lease.Token // the attempt's ledger token
	Deadline    time.Time   // lease deadline in the ledger, by Redis time
	Attempt     int
	Payload     []byte
	Kind        string
	OperationID string
	Resource    string // the leased resource named by the args ("" = the job itself)
	Timeout     time.Duration
	MaxRetries  int
	// KindDefers counts how often the job was put back because the pool
	// that claimed it knew no worker for its kind.
	KindDefers int
	// Headers are the job's headers (nil: none).
	Headers map[string]string
}

// Dropped is a due-index entry a claim removed without starting an attempt:
// its record is missing (expired, or lost), or the job is in another state
// (a redelivery of a finished job is counted as deduplicated).
type Dropped struct {
	ID    string
	State string // "missing" or the job's state
}

// ClaimResult is what one claim call found.
type ClaimResult struct {
	Jobs    []Claimed
	Dropped []Dropped
	// Paused is true when the queue is paused (nothing was claimed).
	Paused bool
	// DueIn is how long until the earliest pending job left becomes due by
	// the Redis clock (at most a day): 0 when one is due now (claim again),
	// -1 when the queue has no pending job left.
	DueIn time.Duration
}

// claimWidth is the number of reply values per claimed job, and
// claimExtras the number in its optional-fields array.
const (
	claimWidth  = 7
	claimExtras = 5
)

// Claim is the fenced claim: it takes up to max due jobs of queue q for
// owner and starts an attempt on each (running, a new token
// max(stored + 1, (epoch << 52) + Redis TIME in µs), lease deadline
// now + ttl, attempt + 1). After a failover the first claim that finds due
// jobs learns the new primary's fencing epoch before minting, so its tokens
// are above every token minted before, whatever the new primary's clock
// says; while the primary keeps changing it fails with an error matching
// epoch.ErrUnsettled (lease.ErrUnsettled). A paused queue yields nothing.
//
// With Config.Durability, a claim too few replicas acknowledged in time
// returns its result and an error matching durable.ErrUnacknowledged: the
// jobs in it are running under the returned tokens on the primary (and
// perhaps on no replica). The caller must not start them; it puts them
// back (Complete with a Defer outcome), or leaves them to lease expiry.
func (l *Ledger) Claim(ctx context.Context, q, owner string, ttl time.Duration, max int) (*ClaimResult, error) {
	if max <= 0 {
		return &ClaimResult{}, nil
	}
	var r *reply
	var seen seqSeen
	var unacked error
	err := l.epoch.Mint(ctx, func(st epoch.State) (bool, error) {
		seen = l.watch.before(q)
		v, err := l.lanes.claim.Run(ctx, claimScript, l.keys(q),
			l.prefix(q), owner, ttl.Milliseconds(), max, st.ReplID, st.Epoch, st.Born).Result()
		unacked = nil
		if errors.Is(err, durable.ErrUnacknowledged) && v != nil {
			// The claim ran; too few replicas hold it. Its jobs are read
			// below so the caller can put them back, never start them.
			unacked, err = err, nil
		}
		r = newReply("claim", v, err)
		if err := r.need(3); err != nil {
			return false, err
		}
		return r.int(0) == -1, nil // another primary: refresh (nothing was claimed)
	})
	if err != nil {
		return nil, wrap("claim "+q, err)
	}
	const header = 8
	if err := r.need(header); err != nil {
		return nil, wrap("claim "+q, err)
	}
	res := &ClaimResult{Paused: r.int(0) == 1, DueIn: -1}
	if due := r.int(1); due >= 0 {
		res.DueIn = time.Duration(min(due, maxDueIn.Milliseconds())) * time.Millisecond
	}
	n := int(r.int(2))
	seq := seqReply{seq: r.int(3), bumped: r.int(4), enqueued: r.int(5), hist: r.str(7)}
	deadline := time.UnixMilli(r.int(6))
	if err := r.need(header + n*claimWidth); err != nil {
		return nil, wrap("claim "+q, err)
	}
	res.Jobs = make([]Claimed, n)
	for i := range res.Jobs {
		b := header + i*claimWidth
		c := Claimed{
			ID: r.str(b), Queue: q, Token: lease.Token(r.uint(b + 1)), Deadline: deadline,
			Attempt: int(r.int(b + 2)), Payload: []byte(r.str(b + 3)), Kind: r.str(b + 4),
			MaxRetries: int(r.int(b + 5)),
		}
		if x, ok := r.at(b + 6).([]any); ok {
			e := &reply{script: r.script, v: x}
			if err := e.need(claimExtras); err != nil {
				return nil, wrap("claim "+q, err)
			}
			c.OperationID, c.Resource = e.str(0), e.str(1)
			c.Timeout = time.Duration(e.int(2)) * time.Millisecond
			c.KindDefers, c.Headers = int(e.int(3)), decodeHeaders(e.str(4))
			if e.err != nil {
				return nil, wrap("claim "+q, e.err)
			}
		} else if r.int(b+6) != 0 {
			r.fail("value %d: want 0 or the optional fields", b+6)
		}
		c.OperationID = opOf(c.ID, c.OperationID)
		res.Jobs[i] = c
	}
	for i := header + n*claimWidth; i+1 < r.len(); i += 2 {
		res.Dropped = append(res.Dropped, Dropped{ID: r.str(i), State: r.str(i + 1)})
	}
	if r.err != nil {
		return nil, wrap("claim "+q, r.err)
	}
	if unacked != nil {
		return res, wrap("claim "+q, unacked)
	}
	l.observe(ctx, q, seen, seq)
	return res, nil
}

// Attempt names one running attempt: a job and the token that runs it.
type Attempt struct {
	ID    string
	Token lease.Token
}

// RenewStatus is the ledger's answer to one attempt's renewal.
type RenewStatus int

// Renewal answers.
const (
	// Lost: the token no longer runs the job (a newer attempt, the
	// reconciler or a lost Redis took it). The attempt must stop.
	Lost RenewStatus = iota
	// Renewed: the deadline was extended.
	Renewed
	// CancelRequested: renewed, and an operator asked to cancel the job; the
	// attempt's context should be cancelled. Its outcome is still committed.
	CancelRequested
)

// Renewal is the answer for one attempt.
type Renewal struct {
	Status   RenewStatus
	Deadline time.Time // new ledger deadline when renewed
	State    string    // the job's state when lost ("missing" when gone)
}

// Renew extends the ledger deadline of a batch of running attempts of queue
// q by ttl from now (Redis time), each only for its own token.
func (l *Ledger) Renew(ctx context.Context, q string, ttl time.Duration, attempts []Attempt) ([]Renewal, error) {
	if len(attempts) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+2*len(attempts))
	args = append(args, ttl.Milliseconds())
	for _, a := range attempts {
		args = append(args, a.ID, a.Token.String())
	}
	v, err := l.run(ctx, l.lanes.renew, renewScript, q, args...).Result()
	r := newReply("renew", v, err)
	if err := r.need(2 * len(attempts)); err != nil {
		return nil, wrap("renew "+q, err)
	}
	out := make([]Renewal, len(attempts))
	for i := range out {
		switch code := r.int(2 * i); code {
		case 0:
			out[i] = Renewal{Status: Lost, State: r.str(2*i + 1)}
		case 1, 2:
			out[i] = Renewal{Status: RenewStatus(code), Deadline: time.UnixMilli(r.int(2*i + 1))}
		default:
			r.fail("renewal code %d", code)
		}
	}
	return out, wrap("renew "+q, r.err)
}

// Outcome is what an attempt reports when it ends.
type Outcome struct {
	// To is Succeeded, Dead, Uncertain, or Pending (a retry: the ledger turns
	// it into Dead when retries are exhausted, and into Cancelled when an
	// operator asked to cancel the job).
	To State
	// Defer puts the job back to pending after RetryIn without consuming its
	// attempt (its resource was busy). To is ignored.
	Defer bool
	// UnknownKind is a Defer because the pool knows no worker for the
	// job's kind (a rolling deploy); the job's KindDefers count rises.
	UnknownKind bool
	// Error is the handler's error text (shown to operators).
	Error string
	// Reason says why the job is dead, uncertain or deferred.
	Reason string
	// RetryIn is how long after the completion is applied (by Redis's
	// clock) a retry or deferred job becomes due.
	RetryIn time.Duration
	// Output is the JSON the attempt recorded (jobs.RecordOutput), written
	// only with a success; OutputDisplay is it redacted (nil: the same).
	Output, OutputDisplay []byte
}

// Completion is one attempt's outcome, handed to Complete.
type Completion struct {
	ID    string
	Token lease.Token // the attempt's ledger token
	// Fence is the resource lease's token when the attempt leased a named
	// resource (recorded as evidence); 0 otherwise.
	Fence   lease.Token
	Outcome Outcome
}

// Committed is the ledger's answer to one completion.
type Committed struct {
	// Applied is false when the token no longer ran the job: nothing changed
	// but the fenced-rejection count and the job's history.
	Applied bool
	// State is the job's state after the call.
	State State
	// Current is the job's current token (for a stale completion, the
	// newer attempt's).
	Current lease.Token
}

// completeWidth is the number of reply values per outcome: the state
// when applied, else an array of the state and the current token.
const completeWidth = 1

// Complete applies a batch of outcomes of queue q's attempts, each only if
// its token still runs the job.
func (l *Ledger) Complete(ctx context.Context, q string, cs []Completion) ([]Committed, error) {
	out, errs := l.CompleteAll(ctx, []QueueCompletions{{Queue: q, Completions: cs}})
	return out[0], errs[0]
}

// QueueCompletions are the outcomes of one queue's attempts (CompleteAll).
type QueueCompletions struct {
	Queue       string
	Completions []Completion
}

// CompleteAll applies the outcomes of several queues' attempts as Complete
// applies each queue's, the queues' calls sent together (one round trip).
// It returns each queue's answers and error, in the order of qs. A
// queue's call Redis refused (a read-only replica, such as a primary a
// failover demoted; NOREPLICAS; OOM) fails with an error matching
// ErrWriteRefused or ErrOutOfMemory: none of its outcomes was applied.
func (l *Ledger) CompleteAll(ctx context.Context, qs []QueueCompletions) ([][]Committed, []error) {
	out, errs := make([][]Committed, len(qs)), make([]error, len(qs))
	calls := make([]scriptbatch.Call, 0, len(qs))
	sent := make([]int, 0, len(qs)) // the index in qs of each call
	seen := make([]seqSeen, 0, len(qs))
	for i, qc := range qs {
		if len(qc.Completions) == 0 {
			continue
		}
		args, err := completeArgs(l.cfg.Retention, qc.Completions)
		if err != nil {
			errs[i] = err
			continue
		}
		lay := l.layoutOf(qc.Queue)
		calls = append(calls, scriptbatch.Call{Script: completeScript, Keys: lay.keys, Args: append([]any{lay.prefix}, args...)})
		sent = append(sent, i)
		seen = append(seen, l.watch.before(qc.Queue))
	}
	if len(calls) == 0 {
		return out, errs
	}
	for j, cmd := range l.lanes.complete.RunAll(ctx, calls) {
		i := sent[j]
		v, err := cmd.Result()
		out[i], errs[i] = l.completed(ctx, qs[i].Queue, qs[i].Completions, seen[j], v, err)
	}
	return out, errs
}

// completeArgs are the complete script's arguments for cs.
func completeArgs(retention time.Duration, cs []Completion) ([]any, error) {
	args := make([]any, 0, 1+9*len(cs)) // 9 values per outcome, 3 for a plain success
	args = append(args, retention.Milliseconds())
	for _, c := range cs {
		o := c.Outcome
		outcome := string(o.To)
		switch {
		case o.UnknownKind:
			outcome = "unknown_kind"
		case o.Defer:
			outcome = "defer"
		case o.To == Pending:
			outcome = "retry"
		case o.To != Succeeded && o.To != Dead && o.To != Uncertain:
			return nil, invalid("outcome %q: want succeeded, dead, uncertain, pending (retry) or a defer", o.To)
		}
		fence := ""
		if c.Fence > 0 {
			fence = c.Fence.String()
		}
		var out, shown []byte
		if o.To == Succeeded && !o.Defer && !o.UnknownKind && len(o.Output) > 0 {
			out = o.Output
			if !bytes.Equal(o.OutputDisplay, o.Output) {
				shown = o.OutputDisplay
			}
		}
		if outcome == string(Succeeded) && o.Error == "" && o.Reason == "" && fence == "" && out == nil {
			// the short form (a success's delay is unused): each argument
			// costs Redis about as much as a field read
			args = append(args, c.ID, c.Token.String(), "ok")
			continue
		}
		args = append(args, c.ID, c.Token.String(), outcome, CapError(o.Error), o.RetryIn.Milliseconds(), o.Reason, fence, out, shown)
	}
	return args, nil
}

// MaxErrorLen bounds the bytes of a handler's error text the ledger keeps
// per attempt (in the job's record and each entry of its history): an HTTP
// client's error quoting a whole response body would otherwise fill Redis
// for the job's retention.
const MaxErrorLen = 8 << 10

// CapError cuts text over MaxErrorLen at a character boundary and says how
// much was cut.
func CapError(text string) string {
	if len(text) <= MaxErrorLen {
		return text
	}
	cut := MaxErrorLen
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes cut)", text[:cut], len(text)-cut)
}

// completed reads the complete script's reply to queue q's outcomes cs.
func (l *Ledger) completed(ctx context.Context, q string, cs []Completion, seen seqSeen, v any, err error) ([]Committed, error) {
	const header = 4
	n := len(cs)
	if refused := refusedWrite(err); refused != nil {
		return nil, wrap("complete "+q, refused) // nothing applied
	}
	r := newReply("complete", v, err)
	if err := r.need(header + completeWidth*n); err != nil {
		return nil, wrap("complete "+q, err)
	}
	out := make([]Committed, n)
	for i := range out {
		b := header + completeWidth*i
		if x, ok := r.at(b).([]any); ok { // stale
			s := &reply{script: r.script, v: x}
			if err := s.need(2); err != nil {
				return nil, wrap("complete "+q, err)
			}
			out[i] = Committed{State: State(s.str(0)), Current: lease.Token(s.uint(1))}
			if s.err != nil {
				return nil, wrap("complete "+q, s.err)
			}
			continue
		}
		out[i] = Committed{Applied: true, State: State(r.str(b)), Current: cs[i].Token}
	}
	if r.err != nil {
		return nil, wrap("complete "+q, r.err)
	}
	l.observe(ctx, q, seen, seqReply{seq: r.int(0), bumped: r.int(1), enqueued: r.int(2), hist: r.str(3)})
	if r.len() > header+completeWidth*n {
		l.moveAfter(ctx, q) // workflow steps handed their ends to other queues
	}
	return out, nil
}

// Expired is what one expiry pass did.
type Expired struct {
	// Moved are the running jobs whose lease deadline passed without a
	// commit; they are now uncertain.
	Moved []string
	// Reviewed are running-index entries whose record holds a state no job
	// has (edited by hand or corrupt); they are now in review.
	Reviewed []string
	// Lost are running-index entries whose record is gone (evicted by a
	// Redis that may evict, or deleted by hand), removed: those jobs are
	// lost.
	Lost []string
	// Dropped are running-index entries whose record is in another state
	// (stale entries), removed.
	Dropped []string
	// NextIn is how long until the earliest running deadline left, by the
	// Redis clock (-1: nothing runs).
	NextIn time.Duration
}

// Expire moves up to max running jobs of queue q whose lease deadline
// passed to uncertain. leader is the reconciler's lease token; a token
// below the highest seen for the queue gets ErrStale.
func (l *Ledger) Expire(ctx context.Context, q string, leader lease.Token, max int) (*Expired, error) {
	out, errs := l.ExpireAll(ctx, []string{q}, leader, max)
	return out[0], errs[0]
}

// ExpireAll runs Expire on each of qs, the calls sent together (one round
// trip): a new leader's first pass over a thousand queues is a few round
// trips. It returns each queue's result and error, in the order of qs.
func (l *Ledger) ExpireAll(ctx context.Context, qs []string, leader lease.Token, max int) ([]*Expired, []error) {
	calls := make([]scriptbatch.Call, len(qs))
	for i, q := range qs {
		lay := l.layoutOf(q)
		calls[i] = scriptbatch.Call{Script: expireScript, Keys: lay.keys, Args: []any{lay.prefix, leader.String(), max}}
	}
	out, errs := make([]*Expired, len(qs)), make([]error, len(qs))
	if len(qs) == 0 {
		return out, errs
	}
	for i, cmd := range l.lanes.other.RunAll(ctx, calls) {
		v, err := cmd.Result()
		out[i], errs[i] = expired(qs[i], leader, v, err)
	}
	return out, errs
}

// expired reads the expire script's reply for queue q.
func expired(q string, leader lease.Token, v any, err error) (*Expired, error) {
	r := newReply("expire", v, err)
	if err := r.need(1); err != nil {
		return nil, wrap("expire "+q, err)
	}
	if r.int(0) == -1 {
		return nil, fmt.Errorf("%w: reconciler token %d on queue %s", ErrStale, leader, q)
	}
	out := &Expired{NextIn: -1}
	if next := r.int(1); next >= 0 {
		out.NextIn = time.Duration(next) * time.Millisecond
	}
	n, rv, lost := int(r.int(2)), int(r.int(3)), int(r.int(4))
	for i := 5; i < r.len(); i++ {
		switch {
		case i < 5+n:
			out.Moved = append(out.Moved, r.str(i))
		case i < 5+n+rv:
			out.Reviewed = append(out.Reviewed, r.str(i))
		case i < 5+n+rv+lost:
			out.Lost = append(out.Lost, r.str(i))
		default:
			out.Dropped = append(out.Dropped, r.str(i))
		}
	}
	return out, wrap("expire "+q, r.err)
}

// Lead records leader as queue q's reconciler leader token, so reconcilers
// holding older tokens are refused on q from now on. It fails with
// ErrStale when a newer leader was already seen.
func (l *Ledger) Lead(ctx context.Context, q string, leader lease.Token) error {
	n, err := l.run(ctx, l.lanes.other, leadScript, q, leader.String()).Int()
	if err != nil {
		return wrap("lead "+q, err)
	}
	if n < 0 {
		return fmt.Errorf("%w: reconciler token %d on queue %s", ErrStale, leader, q)
	}
	return nil
}

// Decision is how an uncertain or review job is resolved.
type Decision string

// Decisions.
const (
	// DecideSucceeded marks the job succeeded (its effect is known applied).
	DecideSucceeded Decision = "succeeded"
	// DecideRerun sends the job back to pending, due now, on a new run
	// (an operator's explicit re-run); its next attempt gets a new, higher
	// token. A reconciler's verdict "not applied" is a failed attempt
	// instead: retried after its backoff, or dead once its attempts are spent.
	DecideRerun Decision = "rerun"
	// DecideDead marks the job dead.
	DecideDead Decision = "dead"
	// DecideReview hands the job to an operator.
	DecideReview Decision = "review"
	// DecideLater keeps the job where it is and schedules another look.
	DecideLater Decision = "later"
)

// OperatorPrefix begins the actor of an operator's action
// ("operator:<name>"): in durable mode an operator's decision waits for
// replicas (Decide), a reconciler's does not.
const OperatorPrefix = "operator:"

// Resolution describes one decision on a job.
type Resolution struct {
	// From lists the states the job must be in (default: uncertain, review).
	From []State
	// Decision is what happens.
	Decision Decision
	// Actor is "reconciler:<pool>", "bridge:<worker>" or "operator:<name>":
	// only an operator's re-run runs a job an operator asked to cancel
	// again (a reconciler's ends it cancelled).
	Actor string
	// Note is the evidence or the operator's reason.
	Note string
	// Leader is the reconciler's lease token (0 for an operator).
	Leader lease.Token
	// NextIn is how long (by Redis's clock) until the next look
	// (DecideLater).
	NextIn time.Duration
	// Seen, when set, is the token the decision was made on (the job's
	// last attempt's; 0 before its first claim): a job that no longer
	// holds it (an attempt was claimed since) fails with ErrWrongState and
	// nothing is written.
	Seen *lease.Token
	// SeenRuns, when set, is the job's run count the decision was made on
	// (Record.Runs): a job an operator re-ran since fails with
	// ErrWrongState and nothing is written, even when it is back in its
	// state and token as seen (cancelled and re-run, say, never claimed).
	SeenRuns *int
	// RetryIn, when set on a DecideRerun, makes it a reconciler's verdict
	// "not applied" on the job's last attempt rather than an explicit
	// re-run: the attempt counts as a failed one. A job with attempts left
	// (Attempts <= MaxRetries) goes back to pending due after *RetryIn (by
	// Redis's clock) on the same run; one whose attempts are spent goes
	// dead, its reason saying so. A job an operator asked to cancel, or a
	// step of a cancelled workflow, ends cancelled either way. Nil: an
	// explicit re-run (an operator's), due at once on a new run.
	RetryIn *time.Duration
}

// Decide applies the resolution r to job id of queue q and returns its new
// state. It is the one primitive behind the reconciler's decisions (fenced by
// r.Leader) and Client.Resolve, the operator's validated entry point. It
// fails with ErrNotFound, ErrWrongState (the job is not in r.From, or no
// longer holds r.Seen) or ErrStale (a newer reconciler leader was seen).
func (l *Ledger) Decide(ctx context.Context, q, id string, r Resolution) (State, error) {
	if siblingID(id) {
		return "", noJob(q, id)
	}
	switch r.Decision {
	case DecideSucceeded, DecideRerun, DecideDead, DecideReview, DecideLater:
	default:
		return "", invalid("unknown decision %q", r.Decision)
	}
	if r.Actor == "" {
		return "", invalid("a resolution needs an actor")
	}
	from := r.From
	if len(from) == 0 {
		from = []State{Uncertain, Review}
	}
	names := make([]string, len(from))
	for i, s := range from {
		names[i] = string(s)
	}
	leader, seen, runs, retry := "", "", "", ""
	if r.Leader > 0 {
		leader = r.Leader.String()
	}
	if r.Seen != nil {
		seen = r.Seen.String()
	}
	if r.SeenRuns != nil {
		runs = strconv.Itoa(*r.SeenRuns)
	}
	if r.RetryIn != nil && r.Decision == DecideRerun {
		retry = strconv.FormatInt(max(r.RetryIn.Milliseconds(), 0), 10)
	}
	// An operator's decision waits for replicas in durable mode; a
	// reconciler's is made again by the next pass when a failover loses it.
	lane := l.lanes.other
	if strings.HasPrefix(r.Actor, OperatorPrefix) {
		lane = l.lanes.ops
	}
	// with the unique index: a re-run unique job holds its key again
	v, err := lane.Run(ctx, resolveScript, l.uniqueKeys(q), l.prefix(q), id, strings.Join(names, ","), string(r.Decision), r.Actor, r.Note,
		leader, l.cfg.Retention.Milliseconds(), r.NextIn.Milliseconds(), seen, runs, retry).Result()
	v, ack, err := unacked(v, err)
	rp := newReply("resolve", v, err)
	if err := rp.need(2); err != nil {
		return "", wrap("resolve "+id, err)
	}
	state := State(rp.str(1))
	switch rp.int(0) {
	case 0:
		if state == "missing" {
			return "", noJob(q, id)
		}
		return state, fmt.Errorf("%w: job %s is %s", ErrWrongState, id, state)
	case -1:
		return state, fmt.Errorf("%w: reconciler token %d", ErrStale, r.Leader)
	case -2:
		return state, fmt.Errorf("%w: job %s moved on (it ran again since): its attempt token is now %s, not %s", ErrWrongState, id, rp.str(2), seen)
	case -4:
		return state, fmt.Errorf("%w: job %s moved on (an operator re-ran it since): it is on run %s, not %s", ErrWrongState, id, rp.str(2), runs)
	case -3:
		return state, fmt.Errorf("%w: job %s is a step of workflow %s, which %s cancelled: its steps do not run again", ErrWrongState, id, rp.str(2), rp.str(3))
	}
	if rp.len() > 2 && rp.int(2) > 0 {
		l.moveAfter(ctx, q)
	}
	if r.Decision == DecideRerun && rp.err == nil && (state == Pending || state == Waiting) {
		l.reopenStep(ctx, q, id) // a workflow settled final runs again
	}
	if rp.err == nil && ack != nil {
		return state, actionErr("resolve "+id, ack)
	}
	return state, wrap("resolve "+id, rp.err)
}

// Cancel cancels job id of queue q on behalf of actor. A pending job (due or
// scheduled), or a workflow step waiting for its dependencies, becomes
// cancelled at once and Cancel returns Cancelled. A
// running job is asked to stop (its handler's context is cancelled at the
// pool's next renewal) and Cancel returns Running; its outcome is still
// committed by its token, and a retry then becomes cancelled. Other states
// fail with ErrWrongState.
func (l *Ledger) Cancel(ctx context.Context, q, id, actor, note string) (State, error) {
	return l.cancel(ctx, q, id, actor, note, "", Seen{})
}

// Seen is what an operator's action on a job was decided on (a page, a
// filtered list). A zero Seen checks nothing.
type Seen struct {
	// State, unless empty, is the state the job must still be in.
	State State
	// Token, when set, is the token the job must still hold (its last
	// attempt's; 0 before its first claim).
	Token *lease.Token
	// Runs, when set, is the run count the job must still have
	// (Record.Runs): an operator's re-run since moved it on, even when it
	// is back in State with Token (cancelled and re-run, never claimed).
	Runs *int
}

// args are seen's script arguments: state, token and runs, "" for
// unchecked.
func (s Seen) args() (string, string, string) {
	tok, runs := "", ""
	if s.Token != nil {
		tok = s.Token.String()
	}
	if s.Runs != nil {
		runs = strconv.Itoa(*s.Runs)
	}
	return string(s.State), tok, runs
}

// movedOn is the error for a job that is no longer as seen: it is state,
// holds token and is on run runs now.
func (s Seen) movedOn(id string, state State, token, runs string) error {
	was := string(s.State)
	switch {
	case s.Token == nil:
	case *s.Token == 0:
		was += " (never claimed)"
	default:
		was += " (token " + s.Token.String() + ")"
	}
	if s.Runs != nil && strconv.Itoa(*s.Runs) != runs {
		return fmt.Errorf("%w: job %s was seen %s on run %d and is now %s on run %s (an operator re-ran it since): it moved on since",
			ErrWrongState, id, strings.TrimSpace(was), *s.Runs, state, runs)
	}
	return fmt.Errorf("%w: job %s was seen %s and is now %s (token %s): it moved on since", ErrWrongState, id, strings.TrimSpace(was), state, token)
}

// CancelSeen is Cancel applied only while job id is as seen: a job that
// moved on since fails with ErrWrongState and nothing is written.
func (l *Ledger) CancelSeen(ctx context.Context, q, id string, seen Seen, actor, note string) (State, error) {
	return l.cancel(ctx, q, id, actor, note, "", seen)
}

// CancelStep is Cancel for a step of a workflow its operator cancels
// (workflow.Cancel): the step is marked first, whatever its state, so it
// never runs again (see cancel.lua). A step uncertain or in review stays so
// (to be reconciled: a verdict "not applied" ends it cancelled) and
// CancelStep returns its state; a finished one fails with ErrWrongState.
func (l *Ledger) CancelStep(ctx context.Context, q, id, actor, note string) (State, error) {
	return l.cancel(ctx, q, id, actor, note, "wf", Seen{})
}

func (l *Ledger) cancel(ctx context.Context, q, id, actor, note, mode string, seen Seen) (State, error) {
	return l.cancelNoted(ctx, q, id, actor, note, mode, seen, "")
}

// cancelNoted is cancel; part, when not empty, is the note of the job's
// workflow's steps in q (wf_part) the caller read: a job whose note
// changed since is left alone (errPartChanged).
func (l *Ledger) cancelNoted(ctx context.Context, q, id, actor, note, mode string, seen Seen, part string) (State, error) {
	if siblingID(id) {
		return "", noJob(q, id)
	}
	st, tok, runs := seen.args()
	v, err := l.run(ctx, l.lanes.ops, cancelScript, q, id, actor, note, l.cfg.Retention.Milliseconds(), mode, st, tok, runs, part).Result()
	v, ack, err := unacked(v, err)
	r := newReply("cancel", v, err)
	if err := r.need(2); err != nil {
		return "", wrap("cancel "+id, err)
	}
	state := State(r.str(1))
	switch r.int(0) {
	case -3:
		return state, errPartChanged
	case -2:
		return state, seen.movedOn(id, state, r.str(2), r.str(3))
	case 0:
		if state == "missing" {
			return "", noJob(q, id)
		}
		return state, fmt.Errorf("%w: job %s is %s", ErrWrongState, id, state)
	}
	if r.len() > 2 && r.int(2) > 0 {
		l.moveAfter(ctx, q)
	}
	if r.err == nil && ack != nil {
		return state, actionErr("cancel "+id, ack)
	}
	return state, wrap("cancel "+id, r.err)
}

// SetPaused pauses (paused true) or resumes queue q on behalf of actor and
// reports whether the queue's state changed. Claims skip a paused queue;
// running attempts go on and enqueues are still accepted.
func (l *Ledger) SetPaused(ctx context.Context, q string, paused bool, actor, note string) (bool, error) {
	return l.setPaused(ctx, q, paused, "", actor, note)
}

// PauseAs is SetPaused's pause under pause id id (Pause.ID), which
// ResumeIf names.
func (l *Ledger) PauseAs(ctx context.Context, q, id, actor, note string) (bool, error) {
	return l.setPaused(ctx, q, true, id, actor, note)
}

// ResumeIf is SetPaused's resume, applied only while queue q is paused by
// the pause of id seen (Pause.ID; "" for a pause recorded without one) or
// not paused at all: a queue paused again since, by another pause, fails
// with an error matching ErrWrongState and stays paused.
func (l *Ledger) ResumeIf(ctx context.Context, q, seen, actor, note string) (bool, error) {
	if seen == "" {
		seen = noPauseID
	}
	return l.setPaused(ctx, q, false, seen, actor, note)
}

// Unpause takes back the pause of id id that the caller just made of queue
// q (PauseAs, with actor) for a change that then failed: the pause and its
// event are removed and no resume is recorded. A queue paused by another
// pause since fails with ErrWrongState and stays paused.
func (l *Ledger) Unpause(ctx context.Context, q, id, actor string) error {
	n, err := l.run(ctx, l.lanes.ops, pauseScript, q, "unpause", actor, "", id).Int()
	if err != nil {
		return actionErr("take back the pause of "+q, err)
	}
	if n == -1 {
		return fmt.Errorf("%w: queue %s was paused again since (by another pause)", ErrWrongState, q)
	}
	return nil
}

// noPauseID is what ResumeIf sends for a pause seen without an id: no
// pause id is ever it, so only a pause recorded without one matches.
const noPauseID = "-"

func (l *Ledger) setPaused(ctx context.Context, q string, paused bool, id, actor, note string) (bool, error) {
	op := "resume"
	if paused {
		op = "pause"
	}
	v, err := l.run(ctx, l.lanes.ops, pauseScript, q, op, actor, note, id).Result()
	v, ack, err := unacked(v, err)
	n, ok := v.(int64)
	if err == nil && !ok {
		err = fmt.Errorf("%w: pause: reply is %T, not an integer", ErrReply, v)
	}
	if err != nil {
		return false, wrap(op+" "+q, err)
	}
	if n == -1 {
		return false, fmt.Errorf("%w: queue %s was paused again since (by another pause than the one seen)", ErrWrongState, q)
	}
	return n == 1, actionErr(op+" "+q, ack)
}

// RunNow makes a scheduled (pending, not yet due) job of queue q due at
// once, on behalf of actor. A pending job already due (a run-now sent
// twice) fails with ErrWrongState and nothing is recorded, so it keeps its
// place and the action is recorded once. A job that is
// not pending fails with ErrWrongState (a bridged job too: its own queue
// delivers it), and so does a job held back by its concurrency limit or its
// rate limit, which decides when it starts.
func (l *Ledger) RunNow(ctx context.Context, q, id, actor, note string) error {
	return l.RunNowSeen(ctx, q, id, Seen{}, actor, note)
}

// RunNowSeen is RunNow applied only while job id is as seen: a job that
// moved on since fails with ErrWrongState and nothing is written.
func (l *Ledger) RunNowSeen(ctx context.Context, q, id string, seen Seen, actor, note string) error {
	if siblingID(id) {
		return noJob(q, id)
	}
	st, tok, runs := seen.args()
	v, err := l.run(ctx, l.lanes.ops, runNowScript, q, id, actor, note, st, tok, runs).Result()
	v, ack, err := unacked(v, err)
	r := newReply("run now", v, err)
	if err := r.need(2); err != nil {
		return wrap("run now "+id, err)
	}
	switch r.int(0) {
	case -2:
		return seen.movedOn(id, State(r.str(1)), r.str(2), r.str(3))
	case -1:
		if r.str(1) == "rate" {
			return fmt.Errorf("%w: job %s is held back by its rate limit: it starts at the earliest start the rate allows", ErrWrongState, id)
		}
		return fmt.Errorf("%w: job %s is held back by its concurrency limit: it starts when a permit frees", ErrWrongState, id)
	case 0:
		state := r.str(1)
		switch state {
		case "missing":
			return noJob(q, id)
		case "due":
			return fmt.Errorf("%w: job %s is already due (made due by a run-now already, or its time came): nothing was done", ErrWrongState, id)
		}
		return fmt.Errorf("%w: job %s is %s", ErrWrongState, id, state)
	}
	if r.err == nil && ack != nil {
		return actionErr("run now "+id, ack)
	}
	return wrap("run now "+id, r.err)
}

// StorageRefused records that storage refused job id's attempt with
// token (the handler's error matched fence.ErrStale): it is counted as
// fenced_storage and listed with the queue's fenced rejections and in the
// job's history, like the ledger's own fenced commits. With a mark, the
// high-water mark of a refusal of the job's own token (the StoredToken of a
// *fence.StaleError for resource "job:<id>"), it also makes the next token
// minted for the job greater than mark, and reports whether it recorded
// the mark: storage has seen a token the ledger no longer knows (a failover
// lost it, and the epochs could not tell), and the next attempt then mints
// above it at once instead of being refused. A running attempt is not
// ended: its outcome is committed by its token as usual. Tokens only rise,
// so a wrong mark costs nothing but token space; mark 0, a mark the job's
// token already reaches, or an unknown job records no mark.
func (l *Ledger) StorageRefused(ctx context.Context, q, id string, token, mark lease.Token) (bool, error) {
	if uint64(mark) == math.MaxUint64 {
		return false, invalid("no token is above mark %d", mark)
	}
	if err := ValidateQueueRef(q); err != nil {
		return false, err
	}
	n, err := l.run(ctx, l.lanes.other, raiseScript, q, id, mark.String(), token.String()).Int()
	if err != nil {
		return false, wrap("storage refusal of "+id, err)
	}
	return n == 1, nil
}
