package pgfence

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
)

type txKey struct{}

// TxFromContext returns the transaction Guard runs its callback in. Writes
// made through it commit or roll back together with the fence.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Guard is Apply for callers that take a plain context, such as the HTTP
// middleware of package httpfence: run gets a context carrying the
// transaction (see TxFromContext) and should make its writes through it.
//
// Ordering: the fence is checked and the operation id recorded inside the
// transaction before run starts, but nothing is visible to others until run
// returns nil and the transaction commits. If run fails, the record and
// run's writes roll back together, so an operation is never marked applied
// without its effect. A concurrent request with the same operation id waits
// on the uncommitted record and then gets fence.ErrAlreadyApplied (or runs,
// if the first one rolled back).
func (s *Store) Guard(ctx context.Context, f fence.Fence, run func(ctx context.Context) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		return run(context.WithValue(ctx, txKey{}, tx))
	})
}
