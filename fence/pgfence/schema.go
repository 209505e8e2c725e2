package pgfence

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options chooses where the tables live. The zero value puts tables named
// fences and effects in the first schema of the connection's search_path.
type Options struct {
	// Schema, when set, qualifies both tables; Migrate creates it if absent.
	// It must be a plain identifier: a letter or underscore, then letters,
	// digits or underscores, at most 63 bytes.
	Schema string
	// TablePrefix is prepended to the table names (fences, effects), e.g.
	// "fq_" gives fq_fences and fq_effects. Same character rules as Schema;
	// at most 40 bytes.
	TablePrefix string
}

// MigrateLockID is the pg_advisory_xact_lock key Migrate holds while it
// creates tables, so that many workers can migrate concurrently.
const MigrateLockID int64 = 0x66715f66656e6365 // "fq_fence"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (o Options) validate() error {
	if o.Schema != "" && (!identRE.MatchString(o.Schema) || len(o.Schema) > 63) {
		return fmt.Errorf("%w: schema %q is not a plain identifier of at most 63 bytes", ErrOptions, o.Schema)
	}
	if o.TablePrefix != "" && (!identRE.MatchString(o.TablePrefix) || len(o.TablePrefix) > 40) {
		return fmt.Errorf("%w: table prefix %q is not a plain identifier of at most 40 bytes", ErrOptions, o.TablePrefix)
	}
	return nil
}

type tables struct {
	fences, effects, effectsIdx string // quoted, schema-qualified where set
}

func (o Options) tables() tables {
	q := func(name string) string {
		if o.Schema != "" {
			return pgx.Identifier{o.Schema, o.TablePrefix + name}.Sanitize()
		}
		return pgx.Identifier{o.TablePrefix + name}.Sanitize()
	}
	return tables{
		fences:     q("fences"),
		effects:    q("effects"),
		effectsIdx: pgx.Identifier{o.TablePrefix + "effects_resource_idx"}.Sanitize(),
	}
}

// Migrate creates the schema (if Options.Schema is set), the high-water
// table and the effect log when they do not exist. It is idempotent and
// safe to run from many processes at once: the DDL runs in one transaction
// holding pg_advisory_xact_lock(MigrateLockID). When the tables and the
// index already exist it returns without taking that lock, so workers
// starting against a migrated database never queue behind a migrator that
// was paused while holding it.
//
// Tables (names depend on Options):
//
//	fences  (resource text PRIMARY KEY, token numeric(20,0) NOT NULL, owner text NOT NULL,
//	         updated_at timestamptz NOT NULL)
//	effects (operation_id text PRIMARY KEY, resource text NOT NULL, token numeric(20,0) NOT NULL,
//	         owner text NOT NULL, applied_at timestamptz NOT NULL)
//	index effects_resource_idx ON effects (resource, applied_at)
//
// Tokens are stored as numeric(20,0), so every uint64 fits.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	t := opts.tables()
	// Fast path: when everything exists there is nothing to create, so do
	// not queue behind the lock. The lock is global to the database: a
	// migrator stopped while holding it (a paused worker starting up) would
	// otherwise stall every worker that starts meanwhile, in any schema.
	// The catalogs are read with plain SQL, not to_regclass: a name lookup
	// would leave a negative catalog-cache entry for a missing schema that
	// CREATE SCHEMA IF NOT EXISTS below could trust after the lock wait.
	var found int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = COALESCE(NULLIF($1, ''), current_schema()) AND c.relname = ANY($2)`,
		opts.Schema, []string{opts.TablePrefix + "fences", opts.TablePrefix + "effects", opts.TablePrefix + "effects_resource_idx"}).Scan(&found)
	if err == nil && found == 3 {
		return nil
	}
	stmts := []string{}
	if opts.Schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{opts.Schema}.Sanitize())
	}
	stmts = append(stmts,
		`CREATE TABLE IF NOT EXISTS `+t.fences+` (
			resource   text PRIMARY KEY,
			token      numeric(20,0) NOT NULL CHECK (token > 0),
			owner      text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now()
		)`,
		`CREATE TABLE IF NOT EXISTS `+t.effects+` (
			operation_id text PRIMARY KEY,
			resource     text NOT NULL,
			token        numeric(20,0) NOT NULL CHECK (token > 0),
			owner        text NOT NULL,
			applied_at   timestamptz NOT NULL DEFAULT now()
		)`,
		`CREATE INDEX IF NOT EXISTS `+t.effectsIdx+` ON `+t.effects+` (resource, applied_at)`,
	)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", MigrateLockID); err != nil {
		return fmt.Errorf("pgfence: migrate: lock: %w", err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("pgfence: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: migrate: commit: %w", err)
	}
	return nil
}
