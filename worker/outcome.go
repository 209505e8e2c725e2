package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
)

// attemptEnd is how an attempt's handler call ended.
type attemptEnd struct {
	err            error // the handler's error (nil: success)
	reason         string
	lost           bool  // a lease was lost mid-call
	lostCause      error // why (for the reason text)
	cancelled      bool  // an operator asked to cancel the job
	timedOut       bool  // the handler's deadline passed
	shutdown       bool  // the pool cancelled the handler at shutdown
	retryOnTimeout bool  // the kind's effects are safe to repeat after a timeout
	reconcilable   bool  // the kind has Reconcile, or the pool an effect log
}

// isTimeout reports whether err is a timeout: the call may have reached
// the dependency, which may have accepted the work.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// decide maps how an attempt ended to the outcome the completer commits.
// Only a proven result is final: a timeout, a lost lease or a shutdown
// mid-call leaves the job uncertain, never guessed failed or succeeded. So
// does a dependency call that timed out before the job's own deadline, for
// kinds that can be reconciled (a Reconcile method, or the pool's effect
// log); other kinds retry it (they should return jobs.Unknown themselves
// when a repeat would be harmful). A retry's due time is set by the caller.
func decide(e attemptEnd) jobs.Outcome {
	err := e.err
	text := ""
	if err != nil {
		text = err.Error()
	}
	switch {
	case err == nil:
		return jobs.Outcome{To: jobs.Succeeded}
	case errors.Is(err, fence.ErrAlreadyApplied):
		// The effect log says this operation's effect is applied.
		reason := "effect already applied"
		var ae *fence.AlreadyAppliedError
		if errors.As(err, &ae) && ae.Elsewhere() {
			reason = fmt.Sprintf("effect already applied by %s (token %d on %s)", ae.Record.Owner, ae.Record.Token, ae.Record.Resource)
		}
		return jobs.Outcome{To: jobs.Succeeded, Error: text, Reason: reason}
	case errors.Is(err, errMalformed):
		return jobs.Outcome{To: jobs.Dead, Error: text, Reason: "malformed payload"}
	case errors.Is(err, jobs.ErrPermanent):
		reason := e.reason
		if reason == "" {
			reason = "permanent error"
		}
		return jobs.Outcome{To: jobs.Dead, Error: text, Reason: reason}
	case errors.Is(err, fence.ErrStale):
		// Storage saw a newer token: this attempt is superseded and its
		// effect was refused. A retry; if a newer attempt owns the job the
		// commit itself is refused.
		return jobs.Outcome{To: jobs.Pending, Error: text}
	case errors.Is(err, jobs.ErrUnknown):
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "handler reported an unknown outcome"}
	case e.lost:
		reason := "lease lost mid-call"
		if e.lostCause != nil {
			reason += ": " + e.lostCause.Error()
		}
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: reason}
	case e.cancelled:
		// The ledger turns a retry of a job an operator cancelled into cancelled.
		return jobs.Outcome{To: jobs.Pending, Error: text}
	case e.timedOut && !e.retryOnTimeout:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "deadline passed mid-call"}
	case e.shutdown:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "worker shut down mid-call"}
	case isTimeout(err) && e.reconcilable && !e.retryOnTimeout:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "a dependency timed out; it may have accepted the work"}
	}
	return jobs.Outcome{To: jobs.Pending, Error: text}
}
