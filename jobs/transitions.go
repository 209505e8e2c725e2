package jobs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// newJob is what Client.Enqueue writes.
type newJob struct {
	id, kind, queue, op, resource string
	payload, display              []byte
	maxRetries                    int
	timeout                       time.Duration
	runAt                         time.Time
	task                          string
}

// insert runs enqueue.lua. It returns the job id and whether the operation
// id was already known (then nothing was written).
func (l *Ledger) insert(ctx context.Context, j newJob) (string, bool, error) {
	reply, err := enqueueScript.Run(ctx, l.rdb, l.keys(j.queue, j.id, j.op),
		j.id, j.kind, j.queue, j.op, j.resource, j.payload, j.display,
		j.maxRetries, j.timeout.Milliseconds(), ms(j.runAt), j.task).Slice()
	if err != nil {
		return "", false, fmt.Errorf("jobs: enqueue: %w", err)
	}
	return str(reply[1]), reply[0].(int64) == 0, nil
}

// Claim is a successful claim: the attempt's token and what it needs to run.
type Claim struct {
	Token       lease.Token
	Deadline    time.Time // lease deadline in the ledger, by Redis time
	Attempt     int
	Payload     []byte
	Kind        string
	OperationID string
	Timeout     time.Duration
	MaxRetries  int
}

// NotClaimable is returned by Claim when the job is not pending. State says
// where it is ("missing" if it does not exist); a delivery of a succeeded or
// dead job was recorded as deduplicated.
type NotClaimable struct {
	State string
	Token lease.Token
}

func (e *NotClaimable) Error() string {
	return fmt.Sprintf("jobs: job is %s (token %d), not pending", e.State, e.Token)
}

// Is makes a stale claim match ErrStale and a missing job ErrNotFound.
func (e *NotClaimable) Is(target error) bool {
	return (target == ErrStale && e.State == "stale") ||
		(target == ErrNotFound && e.State == "missing") ||
		target == ErrWrongState
}

// Claim starts an attempt on a pending job: running, owner, deadline now +
// ttl, attempt count + 1. With token 0 the job is its own resource and the
// ledger mints the token (max(stored + 1, Redis TIME in µs)); otherwise the
// token comes from the resource's lease and must exceed the job's last one.
func (l *Ledger) Claim(ctx context.Context, queue, id, owner string, ttl time.Duration, token lease.Token, task string) (*Claim, error) {
	tok := ""
	if token > 0 {
		tok = token.String()
	}
	reply, err := l.run(ctx, claimScript, l.keys(queue, id, ""), id, owner, ttl.Milliseconds(), tok, task).Slice()
	if err != nil {
		return nil, fmt.Errorf("jobs: claim %s: %w", id, err)
	}
	if reply[0].(int64) == 0 {
		t, _ := strconv.ParseUint(str(reply[2]), 10, 64)
		return nil, &NotClaimable{State: str(reply[1]), Token: lease.Token(t)}
	}
	t, _ := strconv.ParseUint(str(reply[1]), 10, 64)
	dl, _ := strconv.ParseInt(str(reply[2]), 10, 64)
	tms, _ := strconv.ParseInt(str(reply[7]), 10, 64)
	mr, _ := strconv.Atoi(str(reply[8]))
	return &Claim{
		Token: lease.Token(t), Deadline: time.UnixMilli(dl), Attempt: int(reply[3].(int64)),
		Payload: []byte(str(reply[4])), Kind: str(reply[5]), OperationID: str(reply[6]),
		Timeout: time.Duration(tms) * time.Millisecond, MaxRetries: mr,
	}, nil
}

// Renew extends a running attempt's ledger deadline by ttl. It fails with
// ErrStale when token no longer runs the job.
func (l *Ledger) Renew(ctx context.Context, queue, id string, token lease.Token, ttl time.Duration) (time.Time, error) {
	reply, err := l.run(ctx, renewScript, l.keys(queue, id, ""), id, token.String(), ttl.Milliseconds()).Slice()
	if err != nil {
		return time.Time{}, fmt.Errorf("jobs: renew %s: %w", id, err)
	}
	if reply[0].(int64) == 0 {
		return time.Time{}, fmt.Errorf("%w: renew of %s by token %d (job is %s with token %s)", ErrStale, id, token, str(reply[1]), str(reply[2]))
	}
	dl, _ := strconv.ParseInt(str(reply[1]), 10, 64)
	return time.UnixMilli(dl), nil
}

// Outcome is what an attempt reports when it ends.
type Outcome struct {
	// To is Succeeded, Dead, Uncertain, or Pending (a retry: the ledger turns
	// it into Dead when retries are exhausted).
	To State
	// Error is the handler's error text (shown to operators).
	Error string
	// Reason says why the job is dead or uncertain.
	Reason string
	// RetryAt is when a retry becomes due.
	RetryAt time.Time
}

// Commit records an attempt's outcome by its token and returns the state the
// job reached. A token that no longer runs the job gets ErrStale and changes
// nothing but the fenced-rejection count and the job's history.
func (l *Ledger) Commit(ctx context.Context, queue, id, op string, token lease.Token, o Outcome) (State, error) {
	outcome := string(o.To)
	if o.To == Pending {
		outcome = "retry"
	}
	reply, err := l.run(ctx, commitScript, l.keys(queue, id, op), id, token.String(), outcome,
		o.Error, l.cfg.Retention.Milliseconds(), ms(o.RetryAt), o.Reason).Slice()
	if err != nil {
		return "", fmt.Errorf("jobs: commit %s: %w", id, err)
	}
	if reply[0].(int64) == 0 {
		return State(str(reply[1])), fmt.Errorf("%w: commit of %s by token %d (job is %s with token %s)", ErrStale, id, token, str(reply[1]), str(reply[2]))
	}
	return State(str(reply[1])), nil
}

// Expire moves a running job whose ledger deadline passed to uncertain. It
// reports whether the job moved. leader is the reconciler's lease token; a
// token below the highest seen for the queue gets ErrStale.
func (l *Ledger) Expire(ctx context.Context, queue, id string, leader lease.Token) (bool, error) {
	n, err := expireScript.Run(ctx, l.rdb, l.keys(queue, id, ""), id, leader.String()).Int()
	if err != nil {
		return false, fmt.Errorf("jobs: expire %s: %w", id, err)
	}
	if n < 0 {
		return false, fmt.Errorf("%w: reconciler token %d", ErrStale, leader)
	}
	return n == 1, nil
}

// Lead records leader as queue q's reconciler leader token, so reconcilers
// holding older tokens are refused on q from now on. It fails with
// ErrStale when a newer leader was already seen.
func (l *Ledger) Lead(ctx context.Context, q string, leader lease.Token) error {
	n, err := leadScript.Run(ctx, l.rdb, l.keys(q, "", ""), leader.String()).Int()
	if err != nil {
		return fmt.Errorf("jobs: lead %s: %w", q, err)
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
	// DecideRerun sends the job back to pending; its next attempt gets a new,
	// higher token.
	DecideRerun Decision = "rerun"
	// DecideDead marks the job dead.
	DecideDead Decision = "dead"
	// DecideReview hands the job to an operator.
	DecideReview Decision = "review"
	// DecideLater keeps the job where it is and schedules another look.
	DecideLater Decision = "later"
)

// Resolution describes one decision on an uncertain or review job.
type Resolution struct {
	// From lists the states the job must be in (default: uncertain, review).
	From []State
	// Decision is what happens.
	Decision Decision
	// Actor is "reconciler" or the operator's name.
	Actor string
	// Note is the evidence or the operator's reason.
	Note string
	// Leader is the reconciler's lease token (0 for an operator).
	Leader lease.Token
	// NextTry is when to look again (DecideLater).
	NextTry time.Time
}

// Resolve applies r to rec's job and returns its new state. For DecideRerun
// the returned task id names the new delivery the caller must enqueue.
func (l *Ledger) Resolve(ctx context.Context, rec *Record, r Resolution) (State, string, error) {
	switch r.Decision {
	case DecideSucceeded, DecideRerun, DecideDead, DecideReview, DecideLater:
	default:
		return "", "", invalid("unknown decision %q", r.Decision)
	}
	if r.Actor == "" {
		return "", "", invalid("a resolution needs an actor")
	}
	from := r.From
	if len(from) == 0 {
		from = []State{Uncertain, Review}
	}
	names := make([]string, len(from))
	for i, s := range from {
		names[i] = string(s)
	}
	leader := ""
	if r.Leader > 0 {
		leader = r.Leader.String()
	}
	task := fmt.Sprintf("%s~r%d", rec.ID, rec.Runs+1)
	reply, err := resolveScript.Run(ctx, l.rdb, l.keys(rec.Queue, rec.ID, rec.OperationID), rec.ID,
		strings.Join(names, ","), string(r.Decision), r.Actor, r.Note, leader,
		l.cfg.Retention.Milliseconds(), ms(r.NextTry), task).Slice()
	if err != nil {
		return "", "", fmt.Errorf("jobs: resolve %s: %w", rec.ID, err)
	}
	switch reply[0].(int64) {
	case 0:
		if str(reply[1]) == "missing" {
			return "", "", fmt.Errorf("%w: %s", ErrNotFound, rec.ID)
		}
		return State(str(reply[1])), "", fmt.Errorf("%w: job %s is %s", ErrWrongState, rec.ID, str(reply[1]))
	case -1:
		return State(str(reply[1])), "", fmt.Errorf("%w: reconciler token %d", ErrStale, r.Leader)
	}
	if r.Decision != DecideRerun {
		task = ""
	}
	return State(str(reply[1])), task, nil
}
