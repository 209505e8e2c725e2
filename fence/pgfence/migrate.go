package pgfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrLegacyTables means Migrate found the unprefixed tables of an earlier
// pgfence (fences, effects) where the default prefix's tables do not exist:
// starting afresh would drop every high-water mark and effect record.
// Set Options.TablePrefix to NoTablePrefix to keep using them, or rename
// them to the prefixed names.
var ErrLegacyTables = errors.New("pgfence: unprefixed tables of an earlier version found")

// ErrNotMigrated means a table, column, function or schema that pgfence's
// migrations create is missing: the database was never migrated, or only
// by an older version. Every Store and Outbox call whose own statement
// hits one returns an error matching it (and the PostgreSQL error); run
// Migrate with the same Options. Errors of the caller's own statements
// (Apply's fn, ApplyBatch's batch) are returned as they are.
var ErrNotMigrated = errors.New("pgfence: tables not migrated")

// notMigrated marks err with ErrNotMigrated, naming the migration to run,
// when PostgreSQL says an object of pgfence's schema is missing; any other
// error is returned as it is.
func notMigrated(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "42P01", "42703", "42883", "3F000": // undefined table, column, function; invalid schema name
		return fmt.Errorf("%w (%w: run pgfence.Migrate with the same Options, which brings them to version %d)", err, ErrNotMigrated, LatestVersion())
	}
	return err
}

// ErrForeignTable means Migrate found a high-water table, effect log or
// outbox of the names Options gives whose columns are not the ones pgfence
// creates (a table it did not create, or one altered since): a token
// column that is not numeric (text compares "9" above "10", double
// precision rounds neighbouring tokens together), a name column that is
// not text, an outbox column of another type than the relay reads and
// writes (an id that is not a uuid, a payload that is not text, a
// failed_at that is not a timestamptz, say), or a missing column. Migrate
// refuses to adopt it and changes nothing.
var ErrForeignTable = errors.New("pgfence: table not as pgfence creates it")

// column is a column checkColumns checks: its name, the base type pgfence
// creates it with, and whether a later migration adds it (checked only
// when present: a table of an earlier version does not have it yet).
type column struct {
	name, typ string
	added     bool
}

// wantColumns are the columns of the tables checkColumns checks.
var wantColumns = map[string][]column{
	"fences":  {{"resource", "text", false}, {"token", "numeric", false}, {"owner", "text", false}},
	"effects": {{"operation_id", "text", false}, {"resource", "text", false}, {"token", "numeric", false}, {"owner", "text", false}},
	"outbox": {
		{"id", "uuid", false}, {"seq", "bigint", false}, {"kind", "text", false}, {"queue", "text", false},
		{"operation_id", "text", false}, {"resource", "text", false}, {"payload", "text", false},
		{"sensitive", "boolean", false}, {"max_retries", "integer", false}, {"timeout_ms", "bigint", false},
		{"run_at", "timestamp with time zone", false}, {"created_at", "timestamp with time zone", false},
		{"failed_at", "timestamp with time zone", true}, {"error", "text", true}, {"options", "jsonb", true},
	},
}

// checkColumns refuses with ErrForeignTable a high-water table, effect log
// or outbox (of those that exist) whose columns are missing or of another
// type than pgfence creates them with.
func checkColumns(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, opts Options) error {
	rows, err := q.Query(ctx, `SELECT c.relname, a.attname, a.atttypid::regtype::text
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = COALESCE(NULLIF($1, ''), current_schema()) AND c.relname IN ($2, $3, $4)`,
		opts.Schema, opts.prefix()+"fences", opts.prefix()+"effects", opts.prefix()+"outbox")
	if err != nil {
		return fmt.Errorf("pgfence: migrate: read columns: %w", err)
	}
	found := map[string]map[string]string{}
	for rows.Next() {
		var table, col, typ string
		if err := rows.Scan(&table, &col, &typ); err != nil {
			rows.Close()
			return fmt.Errorf("pgfence: migrate: read columns: %w", err)
		}
		if found[table] == nil {
			found[table] = map[string]string{}
		}
		found[table][col] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgfence: migrate: read columns: %w", err)
	}
	for _, kind := range []string{"fences", "effects", "outbox"} {
		table := opts.prefix() + kind
		cols, ok := found[table]
		if !ok {
			continue
		}
		for _, w := range wantColumns[kind] {
			switch got, ok := cols[w.name]; {
			case !ok && w.added:
			case !ok:
				return fmt.Errorf("%w: table %s has no column %s", ErrForeignTable, table, w.name)
			case got != w.typ:
				return fmt.Errorf("%w: column %s.%s is %s, not %s", ErrForeignTable, table, w.name, got, w.typ)
			}
		}
	}
	return nil
}

// Migration is one versioned step of the schema.
type Migration struct {
	// Version orders migrations; each is applied once, in order.
	Version int
	// Name says what the migration does.
	Name string
	up   func(t tables) []string
}

// migrations are pgfence's schema steps, oldest first. Never change a
// released one: add a new version.
var migrations = []Migration{
	{Version: 1, Name: "fences and effect log", up: func(t tables) []string {
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + t.fences + ` (
				resource   text PRIMARY KEY,
				token      numeric(20,0) NOT NULL CHECK (token > 0),
				owner      text NOT NULL,
				updated_at timestamptz NOT NULL DEFAULT now()
			)`,
			`CREATE TABLE IF NOT EXISTS ` + t.effects + ` (
				operation_id text PRIMARY KEY,
				resource     text NOT NULL,
				token        numeric(20,0) NOT NULL CHECK (token > 0),
				owner        text NOT NULL,
				applied_at   timestamptz NOT NULL DEFAULT now()
			)`,
			`CREATE INDEX IF NOT EXISTS ` + t.effectsIdx + ` ON ` + t.effects + ` (resource, applied_at)`,
		}
	}},
	{Version: 2, Name: "transactional outbox", up: func(t tables) []string {
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + t.outbox + ` (
				id           uuid PRIMARY KEY,
				seq          bigint GENERATED ALWAYS AS IDENTITY,
				kind         text NOT NULL,
				queue        text NOT NULL,
				operation_id text,
				resource     text,
				payload      text NOT NULL,
				sensitive    boolean NOT NULL DEFAULT false,
				max_retries  integer NOT NULL,
				timeout_ms   bigint NOT NULL DEFAULT 0,
				run_at       timestamptz,
				created_at   timestamptz NOT NULL DEFAULT now()
			)`,
			`CREATE INDEX IF NOT EXISTS ` + t.outboxIdx + ` ON ` + t.outbox + ` (seq)`,
		}
	}},
	// PruneEffects finds expired records by applied_at alone; the index of
	// version 1 leads with the resource. Building it locks the effect log
	// against writes for as long as the build takes (seconds per few
	// million rows): on a large table, create it beforehand with CREATE
	// INDEX CONCURRENTLY under the same name, and this step finds it.
	{Version: 3, Name: "effect-log pruning index", up: func(t tables) []string {
		return []string{
			`CREATE INDEX IF NOT EXISTS ` + t.effectsAgeIdx + ` ON ` + t.effects + ` (applied_at)`,
		}
	}},
	// ApplyBatch pipelines its checks with the caller's statements and the
	// COMMIT, so a refused fence must fail its statement: the function
	// makes Apply's checks (raise every mark in the given order, then
	// record the operation) and raises SQLSTATE FQ001 (stale) or FQ002
	// (already applied) with the values Go needs as JSON in the DETAIL.
	{Version: 4, Name: "fence check function", up: func(t tables) []string {
		return []string{fenceCheckFunction(t)}
	}},
	// A row the relay cannot enqueue (a value out of range, a payload that
	// is not a JSON object, a row edited by hand) is set aside with the
	// time and the reason instead of stopping every later row; relays take
	// only the rows not set aside, through the partial index.
	{Version: 5, Name: "outbox rows set aside", up: func(t tables) []string {
		return []string{
			`ALTER TABLE ` + t.outbox + ` ADD COLUMN IF NOT EXISTS failed_at timestamptz,
				ADD COLUMN IF NOT EXISTS error text`,
			`CREATE INDEX IF NOT EXISTS ` + t.outboxPendingIdx + ` ON ` + t.outbox + ` (seq) WHERE failed_at IS NULL`,
		}
	}},
	// The enqueue options the other columns do not hold (headers, limits,
	// fair group, uniqueness, partition key), as JSON; NULL when none.
	{Version: 6, Name: "outbox job options", up: func(t tables) []string {
		return []string{`ALTER TABLE ` + t.outbox + ` ADD COLUMN IF NOT EXISTS options jsonb`}
	}},
	// Version 4's refusals named the mark's token and owner (or the
	// record's) in their message and DETAIL, which PostgreSQL writes to
	// its server log; together they authorise writes as the holder. The
	// function now names only the resource, and ApplyBatch reads the mark
	// or record after rolling back.
	{Version: 7, Name: "fence check function naming no holder", up: func(t tables) []string {
		return []string{fenceCheckFunction(t)}
	}},
}

// SQLSTATEs the fence check function (migrations 4 and 7) raises.
const (
	sqlStateStale   = "FQ001"
	sqlStateApplied = "FQ002"
)

// fenceCheckFunction is the fence check function (migrations 4 and 7:
// version 4's refusals also named the mark's or record's token and owner,
// which PostgreSQL logs; migration 7 replaces it, and a fresh schema gets
// this one at once). It takes the fences as arrays (tokens as decimal
// text, so every uint64 is exact) sorted by the caller, and the operation
// with its primary fence. Each mark is raised or locked by INSERT ... ON
// CONFLICT DO UPDATE, which locks the row it conflicts with whatever its
// WHERE says. The first stale fence in array order raises FQ001 before
// the effect log is touched; an operation already recorded raises FQ002
// (the INSERT waits for a concurrent transaction inserting the same id,
// and sees its row once it commits). A refusal names only the resource
// (DETAIL {"resource": ...}: the stale fence's, or the one the operation
// applied on): the mark's or record's token and owner together authorise
// writes as the holder (see fence.StaleError), so ApplyBatch reads them
// after rolling back. The raise aborts the transaction, so nothing the
// caller pipelined after the check runs and its COMMIT does not happen.
func fenceCheckFunction(t tables) string {
	return `CREATE OR REPLACE FUNCTION ` + t.fenceCheck + `(
			resources text[], tokens text[], owners text[],
			op text, op_resource text, op_token text, op_owner text)
		RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
		DECLARE
			i integer;
			rec_resource text;
		BEGIN
			FOR i IN 1 .. cardinality(resources) LOOP
				INSERT INTO ` + t.fences + ` AS f (resource, token, owner, updated_at)
				VALUES (resources[i], tokens[i]::numeric, owners[i], now())
				ON CONFLICT (resource) DO UPDATE
				SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = EXCLUDED.updated_at
				WHERE EXCLUDED.token > f.token OR (EXCLUDED.token = f.token AND EXCLUDED.owner = f.owner);
				IF NOT FOUND THEN
					RAISE EXCEPTION USING
						ERRCODE = '` + sqlStateStale + `',
						MESSAGE = format('fence: stale token %s for %L', tokens[i], resources[i]),
						DETAIL = json_build_object('resource', resources[i])::text;
				END IF;
			END LOOP;
			INSERT INTO ` + t.effects + ` (operation_id, resource, token, owner, applied_at)
			VALUES (op, op_resource, op_token::numeric, op_owner, now())
			ON CONFLICT (operation_id) DO NOTHING;
			IF NOT FOUND THEN
				SELECT e.resource INTO rec_resource FROM ` + t.effects + ` e WHERE e.operation_id = op;
				RAISE EXCEPTION USING
					ERRCODE = '` + sqlStateApplied + `',
					MESSAGE = format('fence: operation %L already applied on %L', op, rec_resource),
					DETAIL = json_build_object('resource', rec_resource)::text;
			END IF;
		END
		$fn$`
}

// Migrations returns pgfence's migrations, oldest first.
func Migrations() []Migration { return append([]Migration(nil), migrations...) }

// LatestVersion is the version Migrate brings the schema to.
func LatestVersion() int { return migrations[len(migrations)-1].Version }

// Migrate brings the tables Options names to LatestVersion: it creates the
// schema (if Options.Schema is set) and applies, in order and each once,
// the migrations not yet recorded in the migrations table. It is safe to
// run from many processes at once: everything happens in one transaction
// holding pg_advisory_xact_lock(MigrateLockID), and a migrator that finds
// the migrations applied after waiting for the lock applies nothing. When
// the schema is already current it returns without taking that lock, so
// workers starting against a migrated database never queue behind a
// migrator that was paused while holding it. Either way it reads the
// columns of the high-water table and the effect log, and refuses with
// ErrForeignTable (changing nothing) tables of those names whose fenced
// columns pgfence did not create as they are (see ErrForeignTable).
//
// Tables (names depend on Options; default prefix DefaultTablePrefix):
//
//	migrations (version integer PRIMARY KEY, name text, applied_at timestamptz)
//	fences     (resource text PRIMARY KEY, token numeric(20,0), owner text, updated_at timestamptz)
//	effects    (operation_id text PRIMARY KEY, resource text, token numeric(20,0), owner text,
//	            applied_at timestamptz), index (resource, applied_at)
//	outbox     (id uuid PRIMARY KEY, seq bigint identity, kind, queue, operation_id, resource,
//	            payload text, sensitive boolean, max_retries, timeout_ms, run_at, created_at,
//	            failed_at timestamptz, error text), index (seq), index (seq) WHERE failed_at IS NULL
//	fence_check(resources, tokens, owners text[], op, resource, token, owner text), a function
//
// Tokens are stored as numeric(20,0), so every uint64 fits. Databases
// whose tables were created before migrations were versioned are adopted:
// every step is CREATE ... IF NOT EXISTS.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts Options) error {
	if pool == nil {
		return fmt.Errorf("%w: nil pool", ErrOptions)
	}
	if err := opts.validate(); err != nil {
		return err
	}
	t := opts.tables()
	// Fast path: the schema is current. The catalogs are read with plain
	// SQL, not to_regclass: a name lookup would leave a negative
	// catalog-cache entry for a missing schema that CREATE SCHEMA IF NOT
	// EXISTS below could trust after the lock wait.
	if v, err := version(ctx, pool, opts, t); err == nil && v >= LatestVersion() {
		return checkColumns(ctx, pool, opts)
	}
	if err := checkLegacy(ctx, pool, opts); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", MigrateLockID); err != nil {
		return fmt.Errorf("pgfence: migrate: lock: %w", err)
	}
	if opts.Schema != "" {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{opts.Schema}.Sanitize()); err != nil {
			return fmt.Errorf("pgfence: migrate: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t.migrations+` (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	if err := checkColumns(ctx, tx, opts); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := tx.Query(ctx, `SELECT version FROM `+t.migrations)
	if err != nil {
		return fmt.Errorf("pgfence: migrate: read versions: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("pgfence: migrate: read versions: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgfence: migrate: read versions: %w", err)
	}
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		for _, s := range m.up(t) {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("pgfence: migrate: version %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+t.migrations+` (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("pgfence: migrate: record version %d: %w", m.Version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: migrate: commit: %w", err)
	}
	return nil
}

// Version returns the newest migration applied to the tables Options
// names (0: none).
func Version(ctx context.Context, pool *pgxpool.Pool, opts Options) (int, error) {
	if pool == nil {
		return 0, fmt.Errorf("%w: nil pool", ErrOptions)
	}
	if err := opts.validate(); err != nil {
		return 0, err
	}
	return version(ctx, pool, opts, opts.tables())
}

func version(ctx context.Context, pool *pgxpool.Pool, opts Options, t tables) (int, error) {
	var exists bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = COALESCE(NULLIF($1, ''), current_schema()) AND c.relname = $2)`,
		opts.Schema, opts.prefix()+"migrations").Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("pgfence: version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM `+t.migrations).Scan(&v); err != nil {
		return 0, fmt.Errorf("pgfence: version: %w", err)
	}
	return v, nil
}

// checkLegacy refuses to start afresh under the default prefix next to an
// earlier version's unprefixed tables.
func checkLegacy(ctx context.Context, pool *pgxpool.Pool, opts Options) error {
	if opts.TablePrefix != "" {
		return nil
	}
	var legacy, current int
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE c.relname IN ('fences', 'effects')),
			count(*) FILTER (WHERE c.relname IN ($2, $3))
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = COALESCE(NULLIF($1, ''), current_schema()) AND c.relkind = 'r'`,
		opts.Schema, DefaultTablePrefix+"fences", DefaultTablePrefix+"effects").Scan(&legacy, &current)
	if err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	if legacy == 2 && current == 0 {
		return fmt.Errorf("%w: set Options.TablePrefix to pgfence.NoTablePrefix to keep them, or rename them to %sfences and %seffects",
			ErrLegacyTables, DefaultTablePrefix, DefaultTablePrefix)
	}
	return nil
}
