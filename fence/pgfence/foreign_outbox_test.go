package pgfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
)

// outboxDDL is the outbox table as migrations 2, 5 and 6 create it, with
// column col's type replaced by typ ("" keeps every column as it is; a
// typ of "-" drops col).
func outboxDDL(col, typ string) string {
	cols := []string{
		"id uuid PRIMARY KEY", "seq bigint GENERATED ALWAYS AS IDENTITY", "kind text NOT NULL", "queue text NOT NULL",
		"operation_id text", "resource text", "payload text NOT NULL", "sensitive boolean NOT NULL DEFAULT false",
		"max_retries integer NOT NULL", "timeout_ms bigint NOT NULL DEFAULT 0", "run_at timestamptz",
		"created_at timestamptz NOT NULL DEFAULT now()", "failed_at timestamptz", "error text", "options jsonb",
	}
	out := cols[:0:0]
	for _, c := range cols {
		name, _, _ := strings.Cut(c, " ")
		switch {
		case name != col:
			out = append(out, c)
		case typ != "-":
			out = append(out, name+" "+typ)
		}
	}
	return "CREATE TABLE fencedq_outbox (" + strings.Join(out, ", ") + ")"
}

// An outbox table of pgfence's name whose columns have other types than
// pgfence creates (or lacks one the relay reads) is refused by Migrate
// with ErrForeignTable, as the high-water table and effect log are,
// instead of adopted: its relay would fail on every row, or set each
// aside. Migrate changes nothing. The columns later migrations add may be
// missing (a table of an earlier version), but not of another type.
func TestMigrateRefusesOutboxOfOtherColumnTypes(t *testing.T) {
	for _, tc := range []struct{ col, typ string }{
		{"id", "text"},
		{"payload", "bytea"},
		{"max_retries", "bigint"},
		{"run_at", "timestamp"},
		{"sensitive", "-"},
		{"failed_at", "text"},
		{"options", "json"},
	} {
		t.Run(tc.col+" "+tc.typ, func(t *testing.T) {
			pool := pgtest.New(t)
			ctx := t.Context()
			if _, err := pool.Exec(ctx, outboxDDL(tc.col, tc.typ)); err != nil {
				t.Fatal(err)
			}
			err := pgfence.Migrate(ctx, pool, pgfence.Options{})
			if !errors.Is(err, pgfence.ErrForeignTable) || !strings.Contains(err.Error(), tc.col) {
				t.Fatalf("Migrate over an outbox with %s %s: %v, want ErrForeignTable naming it", tc.col, tc.typ, err)
			}
			if v, err := pgfence.Version(ctx, pool, pgfence.Options{}); v != 0 || err != nil {
				t.Fatalf("version after the refusal: %d, %v", v, err)
			}
		})
	}
	for _, ddl := range []string{outboxDDL("", ""), outboxDDL("options", "-")} {
		pool := pgtest.New(t)
		ctx := t.Context()
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
		if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
			t.Fatalf("Migrate over an outbox as pgfence creates it (%s): %v", ddl, err)
		}
	}
	// A current schema whose outbox was altered since is refused too.
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE fencedq_outbox ALTER COLUMN payload TYPE varchar`); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); !errors.Is(err, pgfence.ErrForeignTable) {
		t.Fatalf("Migrate over a current schema with a varchar payload: %v, want ErrForeignTable", err)
	}
}
