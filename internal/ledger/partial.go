package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrPartial means a read over several queue names read some of them but
// not others (on Redis Cluster, the masters holding them down): the result
// holds what was read. Package jobs exports the same value.
var ErrPartial = errors.New("jobs: some queues or partitions could not be read")

// PartialError is the error of a read over several queue names (every
// queue's, or a partitioned queue's partitions) that read some of them but
// not others: the result holds what was read (a lookup of one job that
// found it nowhere readable returns it instead of an error matching
// ErrNotFound: the job may be on a name not read). It matches ErrPartial.
type PartialError struct {
	// Unreachable names the queue names not read; q#* stands for queue
	// q's partitions when the registries naming them could not be read.
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

// Partial gathers the names a read over several queue names could not
// read, over one or more calls (the zero value reads as nothing missed).
type Partial struct{ e PartialError }

// Fail records that name could not be read, for err.
func (p *Partial) Fail(name string, err error) {
	if !slices.Contains(p.e.Unreachable, name) {
		p.e.Unreachable = append(p.e.Unreachable, name)
	}
	if p.e.Err == nil {
		p.e.Err = err
	}
}

// Add takes the error of a read over several names: nil or a
// *PartialError (whose names it records) lets the caller go on with what
// was read, and Add returns true; any other error is the read's failure
// whole, and Add returns false.
func (p *Partial) Add(err error) bool {
	var pe *PartialError
	switch {
	case err == nil:
		return true
	case errors.As(err, &pe):
		for _, n := range pe.Unreachable {
			p.Fail(n, pe.Err)
		}
		return true
	}
	return false
}

// Missed reports whether name could not be read.
func (p *Partial) Missed(name string) bool { return slices.Contains(p.e.Unreachable, name) }

// Err returns a *PartialError naming the names not read, nil when every
// one was read.
func (p *Partial) Err() error {
	if len(p.e.Unreachable) == 0 {
		return nil
	}
	e := p.e
	e.Unreachable = slices.Clone(e.Unreachable)
	return &e
}

// partialOf is the error of a pipelined read over names where errs[i] is
// names[i]'s: nil when none failed, the first error when every one did or
// ctx ended (the connection, or the caller's deadline, most likely), and a
// *PartialError naming the failed ones otherwise.
func partialOf(ctx context.Context, names []string, errs []error) error {
	var p Partial
	for i, err := range errs {
		if err != nil {
			p.Fail(names[i], err)
		}
	}
	switch {
	case len(p.e.Unreachable) == 0:
		return nil
	case len(p.e.Unreachable) == len(slices.Compact(slices.Sorted(slices.Values(names)))) || ctx.Err() != nil:
		return p.e.Err
	}
	return p.Err()
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
