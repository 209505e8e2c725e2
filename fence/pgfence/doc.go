// Package pgfence fences writes to PostgreSQL (pgx v5, pgxpool).
//
// # Tables
//
// [Migrate] creates two tables (names configurable with [Options]) if they
// do not exist; it is idempotent and safe to run from every worker at start:
//
//	fences  (resource text PRIMARY KEY, token numeric(20,0), owner text, updated_at timestamptz)
//	effects (operation_id text PRIMARY KEY, resource text, token numeric(20,0), owner text, applied_at timestamptz)
//
// fences holds each resource's high-water mark; effects is the effect log.
// Tokens are numeric(20,0), so the whole uint64 range is stored exactly.
//
// # Writing
//
// [Store.Apply] runs your function in one transaction that
//
//  1. inserts or locks the resource's row in fences and raises it to the
//     fence's (token, owner), or returns a *fence.StaleError;
//  2. inserts the operation id into effects, or returns a
//     *fence.AlreadyAppliedError with the recorded resource, token and
//     owner (and the refused fence);
//  3. runs your function with the transaction;
//  4. commits.
//
// Any error rolls back all three. Concurrent writers on one resource queue
// on its row lock, so accepted tokens never decrease; concurrent duplicates
// of one operation queue on its effects row, so exactly one applies.
//
// The effect log is keyed by the operation id alone (effects' primary key):
// an operation id names one effect in the whole table, whatever resource or
// queue a write comes from. A write of an applied operation id on another
// resource is refused with a *fence.AlreadyAppliedError whose Record names
// the resource, token and owner that applied it (see package fence, "Scope
// of an operation id"). The same holds for package redisfence.
// Transactions use the pool's default isolation level; the behaviour above
// is that of READ COMMITTED, PostgreSQL's default. Under REPEATABLE READ or
// SERIALIZABLE, the same conflicts surface as serialization failures
// (SQLSTATE 40001) instead, which are safe to retry.
//
//	err := store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id)
//		return err
//	})
//	switch {
//	case err == nil, errors.Is(err, fence.ErrAlreadyApplied):
//		// done (now, or by an earlier attempt)
//	case errors.Is(err, fence.ErrStale):
//		// a newer lease holder exists: stop
//	}
//
// [Store.ApplyMulti] fences one operation over several resources, each with
// its own token, locking rows in sorted resource order so that transfers
// in opposite directions cannot deadlock. [Store.FenceTx] does the checks in
// a transaction you own. [Store.Guard] adapts Apply to package httpfence:
// the handler's writes go through [TxFromContext] and commit with the fence.
//
// # Reading
//
// [Store.Applied] implements fence.EffectLog from the operation id alone;
// it is what the reconciler asks. [Store.HighWater] reads a resource's mark.
// [Store.FenceOnAcquire] raises a mark without recording an operation, right
// after a lease is acquired. Effect records are kept until
// [Store.PruneEffects] deletes them.
package pgfence
