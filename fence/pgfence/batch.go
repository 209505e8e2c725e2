package pgfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencedq/fencedq/fence"
)

// ApplyBatch is Apply for writes known up front: it runs the statements
// queued in b in one transaction with f's checks, and sends everything
// (BEGIN, the checks, b's statements, COMMIT) in one pipelined round trip.
// Prefer it to Apply whenever the statements do not depend on what an
// earlier one returned: a write of one UPDATE costs one round trip instead
// of three.
//
// The checks and their errors are Apply's: an incomplete fence fails with
// fence.ErrInvalid before the database is touched; a stale fence returns a
// *fence.StaleError carrying the mark that rejected it; an operation id
// already recorded returns a *fence.AlreadyAppliedError carrying the
// record and f. A concurrent write of the same operation id waits for the
// first one's transaction, as with Apply, so pgfence never returns
// fence.ErrInProgress. The checks are one statement, a call of the
// function migration 4 creates (run Migrate first), which fails when it
// refuses f: PostgreSQL then skips b's statements and the COMMIT, and
// ApplyBatch rolls the transaction back. None of b's statements takes
// effect.
//
// b's statements run in queue order after the checks. If one fails,
// PostgreSQL skips the rest and the COMMIT, everything rolls back (the
// effect record too, so the operation can be applied again) and
// ApplyBatch returns that statement's error. Read results with pgx's
// callbacks on the queued queries (QueuedQuery.Exec, Query, QueryRow):
//
//	var n int64
//	b := &pgx.Batch{}
//	b.Queue(`UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, id).
//		Exec(func(ct pgconn.CommandTag) error { n = ct.RowsAffected(); return nil })
//	err := store.ApplyBatch(ctx, f, b)
//
// They run in order once the fence passed, while the results arrive, and
// only read: the server has been sent the COMMIT with the statements, so a
// callback cannot veto the write. ApplyBatch returns a callback's error
// (later callbacks are not called) together with the outcome: when the
// statements committed, the error says so and matches ErrCommitted; a
// retry of the operation is then refused with fence.ErrAlreadyApplied.
// Write a condition that must stop the write into SQL instead, so that its
// statement fails.
//
// b must hold no transaction control (BEGIN, COMMIT, SAVEPOINT, ...; do not
// call b.BeginTx), must not have been sent and must not be sent again. A
// nil or empty b fences and records the operation alone. A failed write
// costs one more round trip (the ROLLBACK), a refused one two (the
// ROLLBACK, then the read of the mark or record that refused it, which
// the refusal does not carry: PostgreSQL logs it), and since pgx
// forgets the prepared statements of a batch that failed, the
// connection's next batch prepares them again, once. As with Apply, a
// failed COMMIT leaves the outcome unknown (ask Applied).
func (s *Store) ApplyBatch(ctx context.Context, f fence.Fence, b *pgx.Batch) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.ApplyMultiBatch(ctx, []fence.Fence{f}, b)
}

// ApplyMultiBatch is ApplyBatch for one operation over several resources,
// each fenced by its own token, with ApplyMulti's rules: every fence
// carries the same OperationID and a distinct Resource; the marks are
// raised in sorted resource order, so operations over overlapping
// resources cannot deadlock; a *fence.StaleError names the first stale
// resource in that order; the effect log records the operation with the
// first fence of the slice (the primary resource).
func (s *Store) ApplyMultiBatch(ctx context.Context, fences []fence.Fence, b *pgx.Batch) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validate(fences); err != nil {
		return err
	}
	sorted := sortFences(fences)
	p := fences[0]
	resources := make([]string, len(sorted))
	tokens := make([]string, len(sorted))
	owners := make([]string, len(sorted))
	for i, f := range sorted {
		resources[i], tokens[i], owners[i] = f.Resource, f.Token.String(), f.Owner
	}
	var user []*pgx.QueuedQuery
	if b != nil {
		user = b.QueuedQueries
	}
	all := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(user)+3)}
	all.BeginTx(pgx.TxOptions{})
	all.Queue(s.q.check, resources, tokens, owners, p.OperationID, p.Resource, p.Token.String(), p.Owner)
	all.QueuedQueries = append(all.QueuedQueries, user...)
	all.Queue("COMMIT")

	br := s.pool.SendBatch(ctx, all)
	tx := br.Tx()
	// After a COMMIT that ran, tx is closed and this sends nothing; after a
	// refusal or a failed statement the transaction is aborted and this
	// rolls it back.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := br.Exec(); err != nil {
		// The batch is prepared before it runs: a missing object of the
		// caller's statements fails here too, and is not pgfence's.
		_ = br.Close()
		if s.names(err) {
			err = notMigrated(err)
		}
		return fmt.Errorf("pgfence: begin: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return s.checkError(ctx, tx, sorted, p, err)
	}
	// b's statements, with their callbacks; after the first error (of a
	// statement or of a callback) the rest are only read.
	var first error
	for _, qq := range user {
		switch {
		case first != nil:
			_, _ = br.Exec()
		case qq.Fn != nil:
			first = qq.Fn(br)
		default:
			_, first = br.Exec()
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && first != nil:
		// A statement failed: the COMMIT was skipped and pgx reports the
		// statement's error again. Otherwise a callback failed, then the
		// COMMIT.
		if errors.Is(err, first) {
			return first
		}
		return errors.Join(first, fmt.Errorf("pgfence: commit %q: %w", p.OperationID, err))
	case err != nil:
		return fmt.Errorf("pgfence: commit %q: %w", p.OperationID, err)
	case tag.String() != "COMMIT":
		return fmt.Errorf("pgfence: commit %q: server answered %q", p.OperationID, tag.String())
	case first != nil:
		return fmt.Errorf("%w: operation %q, but a result callback failed: %w", ErrCommitted, p.OperationID, first)
	}
	return nil
}

// ErrCommitted marks an error of a result callback of ApplyBatch or
// ApplyMultiBatch returned after the write committed: the statements took
// effect and the operation is recorded.
var ErrCommitted = errors.New("pgfence: committed")

// checkDetail is the DETAIL of the fence check function's refusals: the
// resource refused (the stale fence's) or the one the operation applied
// on. Migration 4's function also put the mark's or the record's token and
// owner there; they are read from the tables instead (checkError).
type checkDetail struct {
	Resource *string `json:"resource"`
}

// checkError turns an error of the fence check statement into ApplyBatch's
// error: the refusals the function raises into the fence errors Apply
// returns, anything else wrapped. A refusal names no token or owner
// (PostgreSQL logs it), so this rolls tx back and reads the mark or the
// record: a mark only rises, so the one read rejects the fence too.
func (s *Store) checkError(ctx context.Context, tx pgx.Tx, sorted []fence.Fence, p fence.Fence, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return fmt.Errorf("pgfence: fence operation %q: %w", p.OperationID, err)
	}
	switch pe.Code {
	case sqlStateStale, sqlStateApplied:
	default:
		return fmt.Errorf("pgfence: fence operation %q: %w", p.OperationID, notMigrated(err))
	}
	var d checkDetail
	if jerr := json.Unmarshal([]byte(pe.Detail), &d); jerr != nil || d.Resource == nil {
		return fmt.Errorf("pgfence: fence operation %q: unreadable refusal detail %q: %w", p.OperationID, pe.Detail, err)
	}
	resource := *d.Resource
	_ = tx.Rollback(context.WithoutCancel(ctx))
	var tok string
	if pe.Code == sqlStateApplied {
		// The record is absent only if it was pruned since the refusal, as
		// with Apply.
		rec := fence.Effect{OperationID: p.OperationID, Resource: resource}
		rerr := s.pool.QueryRow(ctx, s.q.recorded, p.OperationID).Scan(&rec.Resource, &tok, &rec.Owner)
		rec.Token = parseToken(tok)
		ae := &fence.AlreadyAppliedError{Record: rec, Fence: p}
		if rerr != nil && !errors.Is(rerr, pgx.ErrNoRows) {
			return fmt.Errorf("%w (its record could not be read: %w)", ae, rerr)
		}
		return ae
	}
	for _, f := range sorted {
		if f.Resource != resource {
			continue
		}
		var owner string
		rerr := s.pool.QueryRow(ctx, s.q.stored, resource).Scan(&tok, &owner)
		se := &fence.StaleError{Fence: f, StoredToken: parseToken(tok), StoredOwner: owner}
		if rerr != nil && !errors.Is(rerr, pgx.ErrNoRows) {
			return fmt.Errorf("%w (its mark could not be read: %w)", se, rerr)
		}
		return se
	}
	return fmt.Errorf("pgfence: fence operation %q: refusal names resource %q, not fenced: %w", p.OperationID, resource, err)
}

// names reports whether err, a PostgreSQL error, names one of the store's
// own objects (its tables, its function or its schema).
func (s *Store) names(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, o := range s.own {
		if strings.Contains(pe.Message, o) {
			return true
		}
	}
	return false
}
