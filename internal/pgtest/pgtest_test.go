package pgtest_test

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/pgtest"
)

func TestNewIsolatesSchemas(t *testing.T) {
	ctx := t.Context()
	a, b := pgtest.New(t), pgtest.New(t)
	if _, err := a.Exec(ctx, `CREATE TABLE things (id int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, `CREATE TABLE things (id int)`); err != nil {
		t.Fatalf("second schema sees the first's table: %v", err)
	}
	if _, err := a.Exec(ctx, `INSERT INTO things VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schemas not isolated: %d rows, %v", n, err)
	}
	var schema string
	if err := a.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "t_testnewisolatesschemas_") {
		t.Fatalf("current_schema() = %q", schema)
	}
}

func TestSchemaDroppedAtCleanup(t *testing.T) {
	var schema string
	t.Run("inner", func(t *testing.T) {
		p := pgtest.New(t)
		if err := p.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
			t.Fatal(err)
		}
	})
	if schema == "" {
		t.Skip("inner test was skipped")
	}
	p := pgtest.New(t)
	var exists bool
	err := p.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists)
	if err != nil || exists {
		t.Fatalf("schema %s still exists after cleanup (%v)", schema, err)
	}
}

func TestSchemaName(t *testing.T) {
	n := pgtest.SchemaName(t)
	if len(n) > 63 || n != strings.ToLower(n) || !strings.HasPrefix(n, "t_testschemaname_") {
		t.Fatalf("SchemaName = %q", n)
	}
	if n == pgtest.SchemaName(t) {
		t.Fatal("SchemaName not unique")
	}
}
