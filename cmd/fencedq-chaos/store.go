package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
)

// The run's schema holds the bank (bank_accounts), pgfence's tables
// (fences, effects) and the chaos suite's own logs. Triggers fill the logs
// inside the writer's transaction, so a log row commits if and only if the
// write it describes commits, and rows of one resource are numbered under
// that resource's fence row lock:
//
//	chaos_fence_log  every change of a fences row: (resource, token, owner)
//	chaos_accepted   every effect recorded by pgfence: an accepted fenced
//	                 write, with the fences row as the same transaction saw it
//	chaos_moves      every balance change, with its transaction id
//
// seq comes from one sequence (chaos_seq) shared by the three logs, so the
// rows of one resource can be merged in the order the storage accepted
// them. chaos_rejected is written by the workers outside the transaction,
// best effort: stale fences and already-applied operations refused by the
// storage. The baseline writes chaos_applied (in its transaction) and
// chaos_attempts (when an attempt starts).
const setupSQL = `
CREATE SEQUENCE IF NOT EXISTS {s}.chaos_seq;
CREATE TABLE IF NOT EXISTS {s}.chaos_fence_log (
	seq      bigint PRIMARY KEY DEFAULT nextval('{s}.chaos_seq'),
	resource text NOT NULL,
	token    numeric(20,0) NOT NULL,
	owner    text NOT NULL,
	txid     bigint NOT NULL,
	at       timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS {s}.chaos_accepted (
	seq          bigint PRIMARY KEY DEFAULT nextval('{s}.chaos_seq'),
	operation_id text NOT NULL,
	resource     text NOT NULL,
	token        numeric(20,0) NOT NULL,
	owner        text NOT NULL,
	hw_token     numeric(20,0),
	hw_owner     text,
	txid         bigint NOT NULL,
	at           timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS {s}.chaos_moves (
	seq     bigint PRIMARY KEY DEFAULT nextval('{s}.chaos_seq'),
	account text NOT NULL,
	delta   bigint NOT NULL,
	txid    bigint NOT NULL,
	at      timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS {s}.chaos_rejected (
	id           bigserial PRIMARY KEY,
	stage        text NOT NULL,
	operation_id text NOT NULL,
	resource     text NOT NULL,
	token        numeric(20,0) NOT NULL,
	owner        text NOT NULL,
	stored_token numeric(20,0),
	stored_owner text,
	worker       text NOT NULL,
	at           timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS {s}.chaos_applied (
	seq          bigint PRIMARY KEY DEFAULT nextval('{s}.chaos_seq'),
	operation_id text NOT NULL,
	queue        text NOT NULL,
	retry        int NOT NULL,
	worker       text NOT NULL,
	txid         bigint NOT NULL,
	at           timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS {s}.chaos_attempts (
	id           bigserial PRIMARY KEY,
	operation_id text NOT NULL,
	queue        text NOT NULL,
	retry        int NOT NULL,
	worker       text NOT NULL,
	at           timestamptz NOT NULL DEFAULT clock_timestamp());

CREATE OR REPLACE FUNCTION {s}.chaos_log_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {s}.chaos_fence_log (resource, token, owner, txid)
	VALUES (NEW.resource, NEW.token, NEW.owner, txid_current());
	RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION {s}.chaos_log_effect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {s}.chaos_accepted (operation_id, resource, token, owner, hw_token, hw_owner, txid)
	VALUES (NEW.operation_id, NEW.resource, NEW.token, NEW.owner,
		(SELECT f.token FROM {s}.fences f WHERE f.resource = NEW.resource),
		(SELECT f.owner FROM {s}.fences f WHERE f.resource = NEW.resource),
		txid_current());
	RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION {s}.chaos_log_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.balance <> OLD.balance THEN
		INSERT INTO {s}.chaos_moves (account, delta, txid)
		VALUES (NEW.id, NEW.balance - OLD.balance, txid_current());
	END IF;
	RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS chaos_fence_log ON {s}.fences;
CREATE TRIGGER chaos_fence_log AFTER INSERT OR UPDATE ON {s}.fences
	FOR EACH ROW EXECUTE FUNCTION {s}.chaos_log_fence();
DROP TRIGGER IF EXISTS chaos_log_effect ON {s}.effects;
CREATE TRIGGER chaos_log_effect AFTER INSERT ON {s}.effects
	FOR EACH ROW EXECUTE FUNCTION {s}.chaos_log_effect();
DROP TRIGGER IF EXISTS chaos_log_move ON {s}.bank_accounts;
CREATE TRIGGER chaos_log_move AFTER UPDATE ON {s}.bank_accounts
	FOR EACH ROW EXECUTE FUNCTION {s}.chaos_log_move();
`

// qschema returns the quoted schema name.
func qschema(schema string) string { return pgx.Identifier{schema}.Sanitize() }

// setupStorage creates the bank, pgfence's tables, the chaos logs and their
// triggers in schema, and the accounts with initial cents each.
func setupStorage(ctx context.Context, pool *pgxpool.Pool, schema string, accounts []string, initial int64) error {
	store, err := bank.NewPostgresStore(ctx, pool, pgfence.Options{Schema: schema, TablePrefix: pgfence.NoTablePrefix})
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, strings.ReplaceAll(setupSQL, "{s}", qschema(schema))); err != nil {
		return fmt.Errorf("create chaos tables: %w", err)
	}
	if err := setupWorkflowStorage(ctx, pool, schema); err != nil {
		return fmt.Errorf("create workflow step tables: %w", err)
	}
	return store.Setup(ctx, accounts, initial)
}

// dropSchema removes the run's schema and everything in it.
func dropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+qschema(schema)+" CASCADE")
	return err
}

// recordingStore is the bank's PostgresStore with one addition: it notes
// every write the storage refused (a stale fence, or an operation already
// applied) in chaos_rejected, so the checker can count storage-side
// rejections. The note is written after the refused transaction, best
// effort: a worker killed or cut off at that moment loses it, so the count
// is a lower bound. Transfers themselves go through bank.PostgresStore
// unchanged.
//
// A careless store ignores the caller's cancellation (it keeps the
// context's values, drops its deadline and cancel): a handler or driver
// that does not honour its context. A worker paused past its lease then
// wakes up and still writes, and only the fence stops it.
type recordingStore struct {
	*bank.PostgresStore
	pool     *pgxpool.Pool
	table    string
	worker   string
	careless bool
}

var (
	_ bank.Store       = (*recordingStore)(nil)
	_ bank.FenceRaiser = (*recordingStore)(nil)
)

func newRecordingStore(ctx context.Context, pool *pgxpool.Pool, schema, worker string, careless bool) (*recordingStore, error) {
	ps, err := bank.NewPostgresStore(ctx, pool, pgfence.Options{Schema: schema, TablePrefix: pgfence.NoTablePrefix})
	if err != nil {
		return nil, err
	}
	return &recordingStore{PostgresStore: ps, pool: pool, worker: worker, careless: careless,
		table: qschema(schema) + ".chaos_rejected"}, nil
}

func (s *recordingStore) ctx(ctx context.Context) context.Context {
	if s.careless {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// Transfer applies t through bank.PostgresStore and notes a refusal.
func (s *recordingStore) Transfer(ctx context.Context, f fence.Fence, t bank.Transfer) error {
	err := s.PostgresStore.Transfer(s.ctx(ctx), f, t)
	s.note(ctx, "transfer", f, err)
	return err
}

// FenceOnAcquire raises the high-water mark and notes a refusal.
func (s *recordingStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	err := s.PostgresStore.FenceOnAcquire(s.ctx(ctx), f)
	s.note(ctx, "acquire", f, err)
	return err
}

func (s *recordingStore) note(ctx context.Context, stage string, f fence.Fence, err error) {
	var stale *fence.StaleError
	var applied *fence.AlreadyAppliedError
	var storedTok, storedOwner string
	switch {
	case errors.As(err, &stale):
		stage = "stale_" + stage
		storedTok, storedOwner = stale.StoredToken.String(), stale.StoredOwner
	case errors.As(err, &applied):
		stage = "already_applied"
		storedTok, storedOwner = applied.Record.Token.String(), applied.Record.Owner
	default:
		return
	}
	op := f.OperationID
	if op == "" {
		op = "-"
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(nctx, `INSERT INTO `+s.table+` (stage, operation_id, resource, token, owner, stored_token, stored_owner, worker)
		VALUES ($1, $2, $3, $4::text::numeric, $5, $6::text::numeric, $7, $8)`,
		stage, op, f.Resource, f.Token.String(), f.Owner, storedTok, storedOwner, s.worker)
}
