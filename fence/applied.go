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
type AlreadyAppliedError struct {
	// Record is what the effect log holds: the resource, token and owner
	// that applied the operation.
	Record Applied
}

// Error describes the recorded operation.
func (e *AlreadyAppliedError) Error() string {
	return fmt.Sprintf("fence: operation %q already applied on %q with token %d of owner %q",
		e.Record.OperationID, e.Record.Resource, e.Record.Token, e.Record.Owner)
}

// Is makes errors.Is(err, ErrAlreadyApplied) true.
func (e *AlreadyAppliedError) Is(target error) bool { return target == ErrAlreadyApplied }
