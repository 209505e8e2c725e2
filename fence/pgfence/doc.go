// Package pgfence fences writes to PostgreSQL (pgx v5, pgxpool).
//
// # Tables and migrations
//
// [Migrate] brings the tables to [LatestVersion]; it is idempotent and safe
// to run from every worker at start. Migrations are versioned: each step
// ([Migrations]) is applied once, in order, and recorded in the migrations
// table, all in one transaction holding a PostgreSQL advisory lock
// ([MigrateLockID]), so processes migrating at once apply each step once;
// when the schema is current, Migrate returns without taking the lock.
// [Version] reads the version applied. Table names take [Options.Schema]
// and [Options.TablePrefix] (default [DefaultTablePrefix], "fencedq_"):
//
//	fencedq_migrations (version integer PRIMARY KEY, name text, applied_at timestamptz)
//	fencedq_fences     (resource text PRIMARY KEY, token numeric(20,0), owner text, updated_at timestamptz)
//	fencedq_effects    (operation_id text PRIMARY KEY, resource text, token numeric(20,0), owner text, applied_at timestamptz)
//	fencedq_outbox     (id uuid PRIMARY KEY, seq bigint identity, kind, queue, operation_id, resource,
//	                    payload text, sensitive boolean, max_retries, timeout_ms, run_at, created_at,
//	                    failed_at timestamptz, error text)
//
// fences holds each resource's high-water mark; effects is the effect log;
// outbox holds jobs committed but not yet relayed. Tokens are
// numeric(20,0), so the whole uint64 range is stored exactly. Migration 4
// adds one function, fencedq_fence_check (same schema and prefix as the
// tables), which [Store.ApplyBatch] calls; migration 7 replaces it with
// one whose refusals name no holder.
//
// Upgrading from a version without table prefixes: the tables were named
// fences and effects. Set TablePrefix to [NoTablePrefix] to keep those
// names (Migrate adopts them and adds the migrations and outbox tables),
// or rename them to the prefixed names. Migrate under the default prefix
// refuses ([ErrLegacyTables]) to start afresh beside them, since empty
// tables would forget every high-water mark and effect record.
//
// # Writing
//
// Two paths make the same checks with the same errors:
//
//   - [Store.ApplyBatch] takes your statements as a pgx.Batch and sends
//     BEGIN, the checks, the statements and COMMIT in one pipelined round
//     trip. It is the recommended path for writes known up front: an
//     UPDATE, an INSERT, a transfer's two UPDATEs.
//   - [Store.Apply] runs your function with the open transaction, for
//     writes that depend on what they read (SELECT, then decide). One
//     statement costs three round trips.
//
// A write of one UPDATE through ApplyBatch:
//
//	b := &pgx.Batch{}
//	b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id)
//	err := store.ApplyBatch(ctx, f, b)
//	switch {
//	case err == nil, errors.Is(err, fence.ErrAlreadyApplied):
//		// done (now, or by an earlier attempt)
//	case errors.Is(err, fence.ErrStale):
//		// a newer lease holder exists: stop
//	}
//
// ApplyBatch's checks are one statement, a call of the function of
// migrations 4 and 7: it raises or locks each fence's mark (sorted
// resource order) and records the operation, as Apply's statement does,
// and when it refuses it raises SQLSTATE FQ001 (stale) or FQ002 (already
// applied) naming only the resource, as JSON in the error's DETAIL: the
// server logs such errors, and the mark's or record's token and owner
// authorise writes as the holder. PostgreSQL aborts the transaction at
// the raise, skips the statements pipelined after it (yours and the
// COMMIT), and ApplyBatch rolls back, reads the mark or the record (a mark
// only rises, so the one read rejects the fence too) and returns the
// *fence.StaleError or *fence.AlreadyAppliedError Apply would. A statement of yours that fails
// aborts it the same way: nothing applies, the effect record included, so
// the operation can be applied later. Results come back through pgx's
// callbacks on the queued queries (QueuedQuery.Exec, Query, QueryRow),
// which read but cannot veto: see ApplyBatch. [Store.ApplyMultiBatch] is
// ApplyBatch over several resources.
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
// of one operation queue on its effects row, so exactly one applies. A
// stale write never reaches step 2, even when its operation id was applied.
//
// Steps 1 and 2 are one SQL statement (two data-modifying CTEs: the
// upsert, then the effects INSERT fed by the upsert's row), sent together
// with the BEGIN in one round trip (a pgx batch). A write whose function
// makes one statement therefore costs three round trips: BEGIN with the
// checks, the function's statement, COMMIT. A refused write costs three
// as well: BEGIN with the checks; a read, in the still open transaction
// that keeps the rows locked, of the mark that rejected it (or of the
// effect record that already applied it); ROLLBACK. ApplyBatch is one
// round trip whatever the number of statements; a refused or failed one
// is two (the batch, the ROLLBACK), and pgx then prepares the batch's
// statements again on that connection's next batch.
// [Store.FenceOnAcquire] is one round trip.
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
//		var balance int64
//		if err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1 FOR UPDATE`, id).Scan(&balance); err != nil {
//			return err
//		}
//		if balance < amount {
//			return errInsufficient // rolls back the fence's record too
//		}
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id)
//		return err
//	})
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
// it is what a pool's resolver asks to reconcile an uncertain job. [Store.HighWater] reads a resource's mark.
// [Store.FenceOnAcquire] raises a mark without recording an operation, right
// after a lease is acquired.
//
// # Pruning the effect log
//
// Effect records are kept until [Store.PruneEffects] deletes those older
// than a retention, in short batches (migration 3 indexes applied_at for
// it). Run it on a schedule from one process, the maintenance leader being
// the natural one (worker.Config.Maintenance.EffectRetention), with a retention longer than any job can still be
// retried, reconciled or re-run: at least the ledger's job retention
// (7 days by default) plus the longest a job may wait in review.
// [DefaultEffectRetention] (30 days) does that for the defaults:
//
//	n, err := store.PruneEffects(ctx, pgfence.DefaultEffectRetention)
//
// # Transactional enqueue (the outbox)
//
// [Enqueue] and [EnqueueMany] (or [Outbox.Enqueue] for tables other than
// the default ones) write a job into the outbox table inside your pgx
// transaction, beside your business writes: if the transaction rolls back,
// no job exists; if it commits, the job will run. Jobs are validated as
// jobs.Client.Enqueue validates them, before anything is written.
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	_, _ = tx.Exec(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, total)
//	op, err := pgfence.Enqueue(ctx, tx, SendConfirmation{Order: id})
//	...
//	err = tx.Commit(ctx) // the job is enqueued after this, never without it
//
// The maintenance leader relays committed rows into the queue: put an
// [Outbox] in worker.Config.Maintenance.Outboxes on your pools. Enqueue
// sends a NOTIFY delivered at commit, on which the leader relays at once;
// it also polls every Maintenance.Interval, so a lost notification (a
// dropped connection, a PostgreSQL restart) only delays a job. Each relay
// batch ([Outbox.Relay]) locks up to 500 rows (FOR UPDATE SKIP LOCKED),
// raises the high-water mark of the resource "fencedq:outbox:<table>" to
// the leader's token (a deposed leader's relay is refused with a
// *fence.StaleError), enqueues the rows with jobs.Client.EnqueueMany, each
// with the operation id "outbox:<row id>" (or the job's own OperationID),
// then deletes them and commits. A relay that dies after the enqueue
// leaves the rows; the next one enqueues them again and the ledger returns
// the jobs already written for those operation ids: no row is enqueued
// twice, none is lost.
//
// The relay re-enqueues the raw JSON args without their Go type, so the
// args of a job with fields tagged fencedq:"sensitive" are shown as
// "[redacted]" as a whole (the handler still gets the full payload).
//
// One bad row never stops the relay. Enqueue refuses what the table
// cannot hold (max retries above the integer column's range, a RunAt
// outside years 1-9999, whose milliseconds would wrap around) besides every
// value jobs.Client.Enqueue refuses. A committed row the relay still
// cannot enqueue (edited by hand, written by an older version: a payload
// that is not a JSON object, an invalid queue or kind, a negative or
// overflowing number, an infinite run_at) is set aside: it stays in the
// table with failed_at and error set (migration 5), a warning naming it
// goes to Options.Logger, and later relays skip it while they move the
// rows after it. An operator lists such rows with [Outbox.Failed] (or
// SELECT id, kind, queue, failed_at, error FROM fencedq_outbox WHERE
// failed_at IS NOT NULL), fixes them with SQL and puts them back with
// [Outbox.Retry], or deletes them.
package pgfence
