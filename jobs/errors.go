package jobs

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalid means an argument (a job, an option, a name, an operator
	// action, a read's parameters, a configuration) was refused before
	// anything was written.
	ErrInvalid = ledger.ErrInvalid
	// ErrPermanent marks a handler error that must not be retried.
	ErrPermanent = errors.New("jobs: permanent failure")
	// ErrUnknown marks a handler error after which the side effect may or may
	// not have happened; the job becomes uncertain.
	ErrUnknown = errors.New("jobs: outcome unknown")
	// ErrStale means a ledger write came from a token that no longer runs the
	// job (a newer attempt took over); nothing changed.
	ErrStale = ledger.ErrStale
	// ErrNotFound means no job has that id (or it expired after retention).
	ErrNotFound = ledger.ErrNotFound
	// ErrWrongState means the job is not in a state that allows the action.
	ErrWrongState = ledger.ErrWrongState
	// ErrEnqueueUnknown means an enqueue failed on its way to or from Redis:
	// the job was written whole or not at all, and the caller cannot tell
	// which. Enqueueing again with the same OperationID is always safe (a
	// job already written is returned, deduplicated); without one, a retry
	// may create a second job.
	ErrEnqueueUnknown = ledger.ErrEnqueueUnknown
	// ErrNotSent means an enqueue was never sent to Redis: no connection
	// to it could be made (a refused dial, Sentinels that named no
	// reachable primary, no connection free in the client's pool in time,
	// a closed client), or a read the enqueue needs first (the queue's
	// partition count, the kinds' rules of a raw enqueue) failed. Nothing
	// was written, so enqueueing again once Redis is reachable creates the
	// job once, with or without an OperationID; for a workflow, it was not
	// committed. An error after the request may have reached Redis matches
	// ErrEnqueueUnknown instead; no error matches both.
	ErrNotSent = ledger.ErrNotSent
	// ErrActionUnknown means, in durable mode (Config.Durability), that an
	// operator's action (Cancel, RunNow, Resolve, Pause, Resume,
	// SetPartitions, RemoveSchedule, workflow.Cancel) ran on the primary
	// but too few replicas acknowledged it in time: it applied there, and
	// may or may not survive a failover. Read the job (or queue) again
	// once the replicas are back, and repeat the action if it is not as
	// wanted (a repeat of an action that survived fails with
	// ErrWrongState, or reports nothing changed).
	ErrActionUnknown = ledger.ErrActionUnknown
	// ErrPartial is what the Inspector's reads over several queue names
	// (every queue's, or a partitioned queue's partitions) return, with
	// everything they could read, when the reads of some names failed (on
	// Redis Cluster, the masters holding them are down): a *PartialError
	// names them, or (Overview, Partitions) the queues and partitions carry
	// the error as Unreachable.
	// A lookup of one job (Get, Find, FindByOperation, an operator action
	// by the queue's name) that found it in none of the names it could read
	// returns a *PartialError rather than an error matching ErrNotFound:
	// the job may be on a name not read.
	ErrPartial = ledger.ErrPartial
	// ErrNextCalled is what an enqueue middleware's next returns, writing
	// nothing, when it was already called for the same enqueue call (a
	// second call would write the jobs again) or the call had ended.
	ErrNextCalled = errors.New("jobs: the enqueue middleware's next was already called for this enqueue, or the enqueue ended")
	// ErrOutOfMemory means Redis refused an enqueue or an operator's action
	// (Cancel, RunNow, Resolve, Pause, Resume and their Seen forms)
	// because it reached its maxmemory (under maxmemory-policy noeviction):
	// nothing was written, so enqueueing again, once Redis has memory,
	// creates the job, with or without an OperationID, and the action can
	// be taken again.
	ErrOutOfMemory = ledger.ErrOutOfMemory
	// ErrWriteRefused means Redis refused an enqueue or an operator's
	// action (Cancel, RunNow, Resolve, Pause, Resume and their Seen forms)
	// before writing: the client reached a read-only replica (a primary a
	// failover demoted, an address that is not the primary's) or a primary
	// with fewer good replicas than its min-replicas-to-write. Nothing was
	// written, so enqueueing again through the primary creates the job,
	// with or without an OperationID, and the action can be taken again;
	// a redis.NewFailoverClient finds the new primary by itself.
	ErrWriteRefused = ledger.ErrWriteRefused
	// ErrForeignKey means a key an enqueued job needs (its own, its limit's
	// or its group's) holds another type than the one fencedq writes there
	// (written by hand, or by something else): nothing was written for that
	// job, whose Result is nil, and the call's other jobs were enqueued; for
	// a workflow (a step's key, the workflow's record, or the note of its
	// steps in a queue, wf_part, edited into something that does not
	// parse), nothing of it was committed. A queue-level key of another
	// type (the stats hash, the events list, a state index, the unique,
	// limits, rates or groups hash, ...) fails an operator's action, a maintenance call or a workflow
	// enqueue that may write it before its first write: nothing was
	// written (enqueues, claims and completions do not check those keys:
	// see the README's "Errors on partial failure"). A periodic schedule's
	// key of another type fails its scheduler's writes the same way.
	ErrForeignKey = ledger.ErrForeignKey
	// ErrScheduleConflict means a periodic schedule is defined otherwise
	// elsewhere: Client.RemoveSchedule refuses to remove a schedule that
	// live pools still define (the error names them), and a scheduler
	// leader whose definition differs from the one a more recently
	// started pool recorded does not overwrite it.
	ErrScheduleConflict = ledger.ErrScheduleConflict
	// ErrNoAttempt means a call that belongs in a handler (Progress,
	// RecordOutput) got a context that no attempt gave.
	ErrNoAttempt = errors.New("jobs: not in a job attempt")
	// ErrNoOutput means the job recorded no output: it has not succeeded
	// (yet), its handler recorded none (see RecordOutput), or it was
	// reconciled as applied after its attempt died.
	ErrNoOutput = errors.New("jobs: no output")
	// ErrDecidedWithoutOutput means the job has no output because it was
	// marked succeeded after its attempt's outcome was unknown (an
	// operator's DecideSucceeded, or a reconciler finding its effect
	// applied): the attempt that did the work recorded none. It matches
	// ErrNoOutput too; the error names who decided. A dependent step needing
	// the output reads what it needs from where the effect was applied
	// (by the step's operation id), or fails (Permanent) for an operator.
	ErrDecidedWithoutOutput = fmt.Errorf("%w: the job was marked succeeded without one", ErrNoOutput)
	// ErrUnknownKind means EnqueueRaw refused a kind that no live pool runs,
	// so its rules are unknown; it also matches ErrInvalid (nothing was
	// written). Start a pool that registers the kind, enqueue it from Go
	// with its type, or vouch that it has no rules with Unchecked.
	ErrUnknownKind = errors.New("jobs: no live pool runs the kind")
	// ErrNotFencedOut means an operator's decision that a job's last
	// attempt did not apply its operation was not recorded: that attempt
	// could not be cut off from the Config.Fencer store first (the store
	// or Redis unreachable). Nothing was decided; try again.
	ErrNotFencedOut = errors.New("jobs: the job's last attempt could not be fenced out")
)

type markedError struct {
	mark error
	err  error
}

func (e *markedError) Error() string {
	if e.err == nil {
		return e.mark.Error()
	}
	return e.err.Error()
}
func (e *markedError) Unwrap() []error { return []error{e.mark, e.err} }

// Permanent wraps err so the job goes to dead without retries. Permanent(nil)
// is not nil: it is an error matching ErrPermanent, so the job still goes
// to dead.
func Permanent(err error) error {
	if err == nil {
		err = ErrPermanent
	}
	return &markedError{mark: ErrPermanent, err: err}
}

// Unknown wraps err to say the side effect may or may not have happened
// (for example a request that timed out after being sent). The job becomes
// uncertain and the reconciler finds out what happened instead of guessing,
// even when the error is also marked Permanent, or joined with another
// error (errors.Join) that a fenced store refused: a refusal proves only
// that its own effect did not happen. When err itself is such a refusal
// (fence.ErrStale), its effect is known not to have happened: a retry.
// Unknown(nil) is not nil: it is an error matching ErrUnknown.
func Unknown(err error) error {
	if err == nil {
		err = ErrUnknown
	}
	return &markedError{mark: ErrUnknown, err: err}
}

// RetryAfter wraps err so that, when it makes the attempt a retry, the
// retry is due after d instead of after the pool's worker.Config.RetryDelay:
// an upstream's Retry-After, a resource known to be back at a given time.
// Unlike River's JobSnooze the attempt counts against MaxRetries, as every
// retry does, and its last retry still ends dead. Everything else about err
// still steers the outcome (a Permanent or Unknown error in it wins); a
// negative d retries at once, and d is capped at MaxDelay. RetryAfter(nil, d)
// is an error too. Inline runs (fencedqtest.WorkJob) leave the retry due at
// once.
func RetryAfter(err error, d time.Duration) error {
	return &RetryAfterError{Err: err, Delay: min(max(d, 0), MaxDelay)}
}

// RetryAfterError is the error RetryAfter returns; find it with errors.As.
type RetryAfterError struct {
	// Err is the handler's error (nil when none was given).
	Err error
	// Delay is how long after the attempt its retry is due (a pool reads
	// a negative one as none and caps it at MaxDelay).
	Delay time.Duration
}

// Error returns the wrapped error's text, or says the delay when there is
// none.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("jobs: retry after %v", e.Delay)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

func invalid(format string, a ...any) error { return ledger.Invalid(format, a...) }
