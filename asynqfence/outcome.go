package asynqfence

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
)

// attemptEnd is how an attempt's handler call ended.
type attemptEnd struct {
	err            error // the handler's error (nil: success)
	lost           bool  // the ledger lease was lost mid-call
	lostCause      error // why (for the reason text)
	cancelled      bool  // an operator asked to cancel the job
	timedOut       bool  // asynq's deadline for the task passed
	shutdown       bool  // asynq cancelled the handler (shutdown, or it gave the task up)
	retryOnTimeout bool  // the kind's effects are safe to repeat after a timeout
	reconcilable   bool  // the kind has Reconcile, or the bridge an effect log
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// decide maps how an attempt ended to the outcome committed to the ledger,
// by the rules native pools follow (worker/outcome.go): only a proven
// result is final; a timeout, a lost lease or a shutdown mid-call leaves
// the job uncertain. asynq.SkipRetry is a permanent failure.
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
		reason := "effect already applied"
		var ae *fence.AlreadyAppliedError
		if errors.As(err, &ae) && ae.Elsewhere() {
			reason = fmt.Sprintf("effect already applied by %s (token %d on %s)", ae.Record.Owner, ae.Record.Token, ae.Record.Resource)
		}
		return jobs.Outcome{To: jobs.Succeeded, Error: text, Reason: reason}
	case errors.Is(err, jobs.ErrPermanent), errors.Is(err, asynq.SkipRetry):
		return jobs.Outcome{To: jobs.Dead, Error: text, Reason: "permanent error"}
	case errors.Is(err, fence.ErrStale):
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
		return jobs.Outcome{To: jobs.Pending, Error: text}
	case e.timedOut && !e.retryOnTimeout:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "deadline passed mid-call"}
	case e.shutdown:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "asynq cancelled the handler mid-call"}
	case isTimeout(err) && e.reconcilable && !e.retryOnTimeout:
		return jobs.Outcome{To: jobs.Uncertain, Error: text, Reason: "a dependency timed out; it may have accepted the work"}
	}
	return jobs.Outcome{To: jobs.Pending, Error: text}
}
