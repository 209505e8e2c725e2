package ledger

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
)

// Sentinel errors of the engine; package jobs exports the same values.
// NotFound returns an error matching ErrNotFound for what is not a job (a
// schedule, a workflow): its text names it ("jobs: schedule x not found").
func NotFound(what string) error { return notFoundError(what) }

type notFoundError string

func (e notFoundError) Error() string { return "jobs: " + string(e) + " not found" }
func (e notFoundError) Unwrap() error { return ErrNotFound }

var (
	// ErrInvalid means an argument (a job, an option, a name, an operator
	// action, a read's parameters, a configuration) was refused before
	// anything was written.
	ErrInvalid = errors.New("jobs: invalid argument")
	// ErrStale means a ledger write came from a token that no longer runs the
	// job (a newer attempt took over); nothing changed.
	ErrStale = errors.New("jobs: stale token")
	// ErrNotFound means no job has that id (or it expired after retention).
	ErrNotFound = errors.New("jobs: job not found")
	// ErrWrongState means the job is not in a state that allows the action.
	ErrWrongState = errors.New("jobs: job not in a state that allows this")
	// ErrEnqueueUnknown means an enqueue failed on its way to or from Redis:
	// the job was written whole or not at all.
	ErrEnqueueUnknown = errors.New("jobs: enqueue outcome unknown; enqueue again with the same operation id")
	// ErrNotSent means an enqueue was never sent to Redis: no connection
	// could be made (see NotSent), or a read it needs first failed. Nothing
	// was written.
	ErrNotSent = errors.New("jobs: enqueue not sent to Redis; nothing was written")
	// ErrActionUnknown means an operator's action ran on the primary but
	// too few replicas acknowledged it in time (Config.Durability): it may
	// or may not survive a failover.
	ErrActionUnknown = errors.New("jobs: operator action applied on the primary but not acknowledged by enough replicas; it may be lost in a failover: read the job or queue again and repeat the action if it is not as wanted")
	// ErrOutOfMemory means Redis refused an enqueue, a completion call
	// (CompleteAll) or an operator's action (cancel, run now, a decision,
	// pause, resume) because it reached its maxmemory (under
	// maxmemory-policy noeviction): nothing was written.
	ErrOutOfMemory = errors.New("jobs: Redis is out of memory (maxmemory reached); nothing was written")
	// ErrWriteRefused means Redis refused an enqueue, a completion call
	// (CompleteAll) or an operator's action (cancel, run now, a decision,
	// pause, resume) before its first write: the server is a read-only
	// replica (READONLY: a primary a failover demoted, or an address that
	// is not the primary's), or a primary with fewer good replicas than its
	// min-replicas-to-write (NOREPLICAS). Nothing was written.
	ErrWriteRefused = errors.New("jobs: Redis refused the write (a read-only replica, or fewer replicas than min-replicas-to-write); nothing was written")
	// ErrForeignKey means a key an enqueued job needs (its own, its limit's
	// or its group's) holds another type than the ledger writes there
	// (written by hand, or by something else): nothing was written for that
	// job, and the call's other jobs were enqueued; for a workflow (a step's
	// key, the workflow's record, or the note of its steps in a queue,
	// wf_part, edited into something that does not parse), nothing of it
	// was committed. A
	// queue-level key of another type (the stats hash, the events list, a
	// state index, the limits, rates or groups hash, ...) fails an
	// operator, maintenance or workflow-enqueue call that may write it,
	// before its first write (queue_guard: the hot paths do not check);
	// so does a periodic schedule's key for its scheduler's writes.
	ErrForeignKey = errors.New("jobs: a key of the job holds another type; nothing was written for it")
	// ErrScheduleConflict means a periodic schedule's recorded definition
	// is not the caller's: a more recently started pool defines it
	// otherwise, or live pools still define a schedule being removed.
	ErrScheduleConflict = errors.New("jobs: periodic schedule defined otherwise")
)

// Invalid returns an error matching ErrInvalid with the formatted reason.
func Invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

func invalid(format string, a ...any) error { return Invalid(format, a...) }

// noJob is the ErrNotFound of job id in queue q.
func noJob(q, id string) error {
	return fmt.Errorf("%w: %s in queue %s", ErrNotFound, ShownID(id), q)
}

// ShownID is a caller-given id (a job's, an operation's) as an error
// shows it: cut to 64 bytes (see Clip), and quoted when it holds anything
// but printable UTF-8, so a 10 KB id or one with escape sequences reaches
// no log or terminal as given.
func ShownID(id string) string {
	c := Clip(id)
	if !utf8.ValidString(c) || strings.ContainsFunc(c, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(c)
	}
	return c
}

// NotSent reports whether a failed Redis call certainly never reached
// Redis: no connection could be made (a refused or failed dial, Sentinels
// that could not name a reachable primary), none was free in the client's
// pool in time, or the client was closed. Any other failure (a reply lost,
// a read timeout, a reset connection) may come after Redis ran the call.
// A reply of Redis's own (a redis.Error) is not one: the call reached it.
func NotSent(err error) bool {
	var re redis.Error
	var op *net.OpError
	switch {
	case err == nil, errors.As(err, &re):
		return false
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed):
		return true
	}
	return errors.As(err, &op) && op.Op == "dial"
}

// refusedWrite returns err matching ErrOutOfMemory or ErrWriteRefused when
// it is Redis's refusal of a write ("OOM ...", "READONLY ...",
// "NOREPLICAS ..."), else nil. Redis refuses a function before it runs and
// a script at its first write (every write is refused alike), so the call
// wrote nothing.
func refusedWrite(err error) error {
	if err == nil {
		return nil // before re is declared: it escapes, and a success pays no allocation
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return nil
	}
	switch msg := re.Error(); {
	case strings.HasPrefix(msg, "OOM "):
		return fmt.Errorf("%w: %w", ErrOutOfMemory, err)
	case strings.HasPrefix(msg, "READONLY "), strings.HasPrefix(msg, "NOREPLICAS "):
		return fmt.Errorf("%w: %w", ErrWriteRefused, err)
	}
	return nil
}

// foreignQueueKey returns err matching ErrForeignKey when it is a script's
// refusal of a queue-level key holding another type (queue_guard in
// prelude.lua, refused before the script's first write), else err.
func foreignQueueKey(err error) error {
	if err == nil {
		return nil // before re is declared (see refusedWrite)
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "FOREIGNKEY ") && !errors.Is(err, ErrForeignKey) {
		return fmt.Errorf("%w: %w", ErrForeignKey, err)
	}
	return err
}

// actionErr is the error of operator action what: one that ran but too
// few replicas acknowledged (durable mode) matches ErrActionUnknown.
func actionErr(what string, err error) error {
	if errors.Is(err, durable.ErrUnacknowledged) {
		return fmt.Errorf("%w: %s: %w", ErrActionUnknown, what, err)
	}
	return wrap(what, err)
}

// unacked splits the reply of an operator's call (one script): a script
// that ran, its reply kept, but too few replicas acknowledged, returns its
// reply with no error and the shortfall as ack, for the caller to report
// once it read the reply (actionErr); Redis's refusal of the script's
// writes (a read-only replica, too few replicas, out of memory) is
// returned matching ErrWriteRefused or ErrOutOfMemory, as nothing was
// written.
func unacked(v any, err error) (reply any, ack, callErr error) {
	if v != nil && errors.Is(err, durable.ErrUnacknowledged) {
		return v, err, nil
	}
	if refused := refusedWrite(err); refused != nil {
		return v, nil, refused
	}
	return v, nil, err
}
