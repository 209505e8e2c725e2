package jobs

import (
	"context"

	"github.com/fencedq/fencedq/internal/ledger"
)

// PartialError is the error of a read over several queue names (every
// queue's, or a partitioned queue's partitions) that read some of them but
// not others (on Redis Cluster, the masters holding them down): the result
// holds what was read. Unreachable names the names not read, Err is the
// first of their errors. It matches ErrPartial.
//
// go doc github.com/fencedq/fencedq/internal/ledger.PartialError lists its fields.
type PartialError = ledger.PartialError

// eachName calls read for every name in turn, going on past a failed one:
// it returns nil when every read succeeded, the error when none did (or
// ctx ended), and a *PartialError naming the failed ones otherwise.
func eachName(ctx context.Context, names []string, read func(name string) error) error {
	var p ledger.Partial
	failed := 0
	for _, n := range names {
		if err := read(n); err != nil {
			if ctx.Err() != nil {
				return err
			}
			p.Fail(n, err)
			failed++
		}
	}
	if failed > 0 && failed == len(names) {
		return p.Err().(*PartialError).Err
	}
	return p.Err()
}
