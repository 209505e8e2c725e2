package fence

import (
	"errors"
	"fmt"
)

// ErrInProgress means another request with the same operation id is being
// applied right now (see the Guard of package redisfence); nothing changed.
// Retry later: the other request either records the operation or gives it up.
var ErrInProgress = errors.New("fence: operation in progress")

// AlreadyAppliedError reports that an operation id was applied before and
// carries the effect log's record of it. It matches ErrAlreadyApplied.
//
// An operation id names one effect across the whole store, whatever the
// resource, queue or job that sends it: the write refused here may come
// from a retry of the job that applied it (Record.Owner is then an earlier
// attempt of the same job) or from another job carrying the same operation
// id (Record names that job's fence; worker pools use "<worker id>/<job
// id>" as owner, so Record.Owner identifies the job that applied it).
type AlreadyAppliedError struct {
	// Record is what the effect log holds: the resource, token and owner
	// that applied the operation (the owner is empty when the answer did
	// not tell it, as httpfence's does not for another holder's). Tell
	// Record.Owner to no one who could send it back with Record.Token.
	Record Effect
	// Fence is the write that was refused (zero when unknown, as for an
	// answer of httpfence.CheckResponse to a request without fence headers).
	Fence Fence
}

// Error describes the recorded operation and, when it came from another
// holder or resource (Elsewhere), the refused write. It names tokens, not
// owners: a token with its owner authorises writes as that holder, and
// error texts travel (to HTTP answers, logs, job records).
func (e *AlreadyAppliedError) Error() string {
	msg := fmt.Sprintf("fence: operation %q already applied on %q with token %d",
		e.Record.OperationID, e.Record.Resource, e.Record.Token)
	if e.Elsewhere() {
		other := ""
		if e.Fence.Token == e.Record.Token && e.Fence.Resource == e.Record.Resource {
			other = " of another owner"
		}
		msg += fmt.Sprintf(" (refused: token %d%s on %q)", e.Fence.Token, other, e.Fence.Resource)
	}
	return msg
}

// Elsewhere reports whether the operation was applied by a different
// holder than the refused write's, or on a different resource: evidence
// that another attempt or another job made the effect. It is false when
// Fence is unknown.
func (e *AlreadyAppliedError) Elsewhere() bool {
	if e.Fence.Token == 0 {
		return false
	}
	return e.Record.Resource != e.Fence.Resource || e.Record.Owner != e.Fence.Owner || e.Record.Token != e.Fence.Token
}

// Is makes errors.Is(err, ErrAlreadyApplied) true.
func (e *AlreadyAppliedError) Is(target error) bool { return target == ErrAlreadyApplied }
