package jobs

import (
	"context"

	"github.com/fencedq/fencedq/internal/ledger"
)

// PartialError is the error of a read over several queue names (a
// partitioned queue's partitions) that read some of them but not others
// (on Redis Cluster, the masters holding them down): the result holds
// what was read. It matches ErrPartial; its Unreachable field names the
// queue names not read and Err is the first of their errors.
//
// go doc github.com/fencedq/fencedq/internal/ledger.PartialError lists its fields.
type PartialError = ledger.PartialError

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
