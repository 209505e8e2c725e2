package jobs

import (
	"context"
	"fmt"
	"strings"
)

// PartialError is the error of a read over several queue names (a
// partitioned queue's partitions) that read some of them but not others
// (on Redis Cluster, the masters holding them down): the result holds
// what was read. It matches ErrPartial.
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

// eachName calls read for every name in turn, going on past a failed one:
// it returns nil when every read succeeded, the error when none did (or
// ctx ended), and a *PartialError naming the failed ones otherwise.
func eachName(ctx context.Context, names []string, read func(name string) error) error {
	var pe PartialError
	for _, n := range names {
		if err := read(n); err != nil {
			if ctx.Err() != nil {
				return err
			}
			pe.Unreachable = append(pe.Unreachable, n)
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
