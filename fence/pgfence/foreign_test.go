package pgfence_test

import (
	"errors"
	"testing"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
)

// A table of pgfence's names that pgfence did not create, whose columns
// have other types than it creates, is refused by Migrate with
// ErrForeignTable instead of adopted: with token as text, PostgreSQL
// compares tokens as strings ("9" > "10") and a lower token would be
// accepted; as double precision, neighbouring 64-bit tokens compare equal.
func TestMigrateRefusesTablesOfOtherColumnTypes(t *testing.T) {
	for _, tc := range []struct{ name, ddl string }{
		{"fences token text", `CREATE TABLE fencedq_fences (resource text PRIMARY KEY, token text NOT NULL, owner text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`},
		{"fences token double", `CREATE TABLE fencedq_fences (resource text PRIMARY KEY, token double precision NOT NULL, owner text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`},
		{"fences owner integer", `CREATE TABLE fencedq_fences (resource text PRIMARY KEY, token numeric(20,0) NOT NULL, owner integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`},
		{"fences without owner", `CREATE TABLE fencedq_fences (resource text PRIMARY KEY, token numeric(20,0) NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`},
		{"effects token bigint", `CREATE TABLE fencedq_effects (operation_id text PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL, owner text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := pgtest.New(t)
			ctx := t.Context()
			if _, err := pool.Exec(ctx, tc.ddl); err != nil {
				t.Fatal(err)
			}
			err := pgfence.Migrate(ctx, pool, pgfence.Options{})
			if !errors.Is(err, pgfence.ErrForeignTable) {
				t.Fatalf("Migrate over %s: %v, want ErrForeignTable", tc.name, err)
			}
			// Nothing was migrated: the refusal rolled everything back.
			if v, err := pgfence.Version(ctx, pool, pgfence.Options{}); v != 0 || err != nil {
				t.Fatalf("version after the refusal: %d, %v", v, err)
			}
		})
	}
}

// A schema migrated before a foreign table replaced one of its tables is
// refused too: Migrate checks the columns also when nothing is left to apply.
func TestMigrateChecksColumnsWhenCurrent(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE fencedq_fences ALTER COLUMN token TYPE double precision`); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); !errors.Is(err, pgfence.ErrForeignTable) {
		t.Fatalf("Migrate over a current schema with a double precision token: %v, want ErrForeignTable", err)
	}
}
