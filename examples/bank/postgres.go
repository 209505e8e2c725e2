package bank

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
)

// PostgresStore keeps accounts in PostgreSQL (table bank_accounts, with the
// pgfence tables beside it; an Options.TablePrefix other than
// pgfence.NoTablePrefix prefixes it too). Balances never go negative.
type PostgresStore struct {
	pool  *pgxpool.Pool
	fence *pgfence.Store
	table string
}

// NewPostgresStore migrates the pgfence tables and the accounts table.
func NewPostgresStore(ctx context.Context, pool *pgxpool.Pool, opts pgfence.Options) (*PostgresStore, error) {
	if err := pgfence.Migrate(ctx, pool, opts); err != nil {
		return nil, err
	}
	fs, err := pgfence.New(pool, opts)
	if err != nil {
		return nil, err
	}
	prefix := opts.TablePrefix
	if prefix == pgfence.NoTablePrefix {
		prefix = ""
	}
	table := pgx.Identifier{prefix + "bank_accounts"}
	if opts.Schema != "" {
		table = pgx.Identifier{opts.Schema, prefix + "bank_accounts"}
	}
	s := &PostgresStore{pool: pool, fence: fs, table: table.Sanitize()}
	// CREATE TABLE IF NOT EXISTS is not safe against itself: of two workers
	// starting together on an empty database, one would fail on the table's
	// row type. The advisory lock, held until the commit, makes them take
	// turns.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
			id text PRIMARY KEY,
			balance bigint NOT NULL CHECK (balance >= 0))`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bank: create accounts: %w", err)
	}
	return s, nil
}

// Fences returns the pgfence store (for its effect log and high-water marks).
func (s *PostgresStore) Fences() *pgfence.Store { return s.fence }

// Setup creates missing accounts.
func (s *PostgresStore) Setup(ctx context.Context, accounts []string, initial int64) error {
	for _, a := range accounts {
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (id, balance) VALUES ($1, $2) ON CONFLICT DO NOTHING`, a, initial); err != nil {
			return fmt.Errorf("bank: setup: %w", err)
		}
	}
	return nil
}

// Transfer debits and credits in the fenced transaction.
func (s *PostgresStore) Transfer(ctx context.Context, f fence.Fence, t Transfer) error {
	return s.fence.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
		return s.transferTx(ctx, tx, t)
	})
}

// transferTx writes t's debit and credit in tx, which the caller fenced
// (Transfer, or the bank service under pgfence's Guard).
func (s *PostgresStore) transferTx(ctx context.Context, tx pgx.Tx, t Transfer) error {
	// Lock both rows in id order first: transfers in opposite directions
	// (a debit here, a credit there) would otherwise deadlock.
	rows, err := tx.Query(ctx, `SELECT id FROM `+s.table+` WHERE id = ANY($1) ORDER BY id FOR UPDATE`, []string{t.From, t.To})
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if err := knownAccounts(t, found); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `UPDATE `+s.table+` SET balance = balance - $2 WHERE id = $1 AND balance >= $2`, t.From, t.Cents)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s cannot cover %d", ErrInsufficientFunds, t.From, t.Cents)
	}
	_, err = tx.Exec(ctx, `UPDATE `+s.table+` SET balance = balance + $2 WHERE id = $1`, t.To, t.Cents)
	return err
}

// FenceOnAcquire raises the source account's high-water mark.
func (s *PostgresStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	return s.fence.FenceOnAcquire(ctx, f)
}

// Applied asks the effect log.
func (s *PostgresStore) Applied(ctx context.Context, op string) (fence.Effect, bool, error) {
	return s.fence.Applied(ctx, op)
}

// Balances reads every account.
func (s *PostgresStore) Balances(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, balance FROM `+s.table)
	if err != nil {
		return nil, fmt.Errorf("bank: balances: %w", err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			return nil, err
		}
		out[id] = b
	}
	return out, rows.Err()
}
