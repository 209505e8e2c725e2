package ledger

import (
	"errors"
	"fmt"
	"strings"
)

// ErrPartial means a read over several queue names (a partitioned queue's
// partitions, every queue of the namespace) read some of them but not
// others: on Redis Cluster, the masters holding them are down. Package
// jobs exports the same value.
var ErrPartial = errors.New("jobs: some queues or partitions could not be read")

// PartialError is the error of a read over several queue names that read
// some of them but not others: the result holds what was read (a lookup
// of one job that found it nowhere readable returns it instead of an error
// matching ErrNotFound: the job may be on a name not read). It matches
// ErrPartial.
type PartialError struct {
	// Unreachable names the queue names not read.
	Unreachable []string
	// Err is the first of their errors.
	Err error
}

// Error names the queue names not read and the first of their errors.
func (e *PartialError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrPartial, strings.Join(e.Unreachable, ", "), e.Err)
}

// Unwrap returns ErrPartial and the first read's error.
func (e *PartialError) Unwrap() []error { return []error{ErrPartial, e.Err} }

// partialOf returns the error of a read over names whose reads failed with
// errs (nil for a name read): nil when none failed, the first error when
// every one did, else a *PartialError naming the failed ones.
func partialOf(names []string, errs []error) error {
	var pe PartialError
	for i, err := range errs {
		if err != nil {
			pe.Unreachable = append(pe.Unreachable, names[i])
			if pe.Err == nil {
				pe.Err = err
			}
		}
	}
	switch len(pe.Unreachable) {
	case 0:
		return nil
	case len(names):
		return pe.Err
	}
	return &pe
}

// missedIn returns the error of a lookup of what (a job, an operation)
// over several names that found it in none of those it read, when err, the
// error of its reads, is a *PartialError: what may be on a name not read,
// so the error matches ErrPartial, not ErrNotFound. It returns nil when
// every name was read (the caller's not-found error stands).
func missedIn(what string, err error) error {
	var pe *PartialError
	if !errors.As(err, &pe) {
		return nil
	}
	return fmt.Errorf("%s is in none of the queues read: %w", what, pe)
}

// partialOnly returns err unless it is a *PartialError (some names were
// read): the error a lookup over several names fails with at once.
func partialOnly(err error) error {
	var pe *PartialError
	if errors.As(err, &pe) {
		return nil
	}
	return err
}
