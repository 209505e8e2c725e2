package pgfence_test

import (
	"errors"
	"testing"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
)

func TestMigrateVersions(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	if v, err := pgfence.Version(ctx, pool, pgfence.Options{}); v != 0 || err != nil {
		t.Fatalf("version before: %d, %v", v, err)
	}
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if v, err := pgfence.Version(ctx, pool, pgfence.Options{}); v != pgfence.LatestVersion() || err != nil {
		t.Fatalf("version after: %d, %v", v, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM fencedq_migrations`).Scan(&n); err != nil || n != len(pgfence.Migrations()) {
		t.Fatalf("%d migrations recorded, %v", n, err)
	}
}

// TestMigrateLegacyTables: unprefixed tables of an earlier version are
// never silently replaced by empty prefixed ones; NoTablePrefix adopts them.
func TestMigrateLegacyTables(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `CREATE TABLE fences (resource text PRIMARY KEY, token numeric(20,0) NOT NULL, owner text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE effects (operation_id text PRIMARY KEY, resource text NOT NULL, token numeric(20,0) NOT NULL, owner text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO fences VALUES ('r', 7, 'o', now())`); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); !errors.Is(err, pgfence.ErrLegacyTables) {
		t.Fatalf("default prefix beside legacy tables: %v", err)
	}
	legacy := pgfence.Options{TablePrefix: pgfence.NoTablePrefix}
	if err := pgfence.Migrate(ctx, pool, legacy); err != nil {
		t.Fatal(err)
	}
	s, err := pgfence.New(pool, legacy)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _, err := s.HighWater(ctx, "r"); tok != 7 || err != nil {
		t.Fatalf("adopted high-water %d, %v", tok, err)
	}
	if _, err := pgfence.NewOutbox(pool, legacy); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatalf("outbox table beside the adopted ones: %v", err)
	}
}
