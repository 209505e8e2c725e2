package pgfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencedq/fencedq/fence"
)

// TestCheckFunctionRefusalNamesNoHolder: the refusals of ApplyBatch's
// check function are errors PostgreSQL writes to its server log (with
// their DETAIL, by default), so they hold neither the mark's token and
// owner nor those of the applied record, which together authorise writes
// as the holder; ApplyBatch still returns them in its *fence.StaleError
// and *fence.AlreadyAppliedError.
func TestCheckFunctionRefusalNamesNoHolder(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	const tok, owner = "8231234567", "holder-secret"
	if err := s.Apply(ctx, f("acct:1", 8231234567, owner, "op-h"), nil); err != nil {
		t.Fatal(err)
	}
	call := func(token, who, op string) *pgconn.PgError {
		t.Helper()
		_, err := pool.Exec(ctx, `SELECT fencedq_fence_check(ARRAY['acct:1'], ARRAY[$1::text], ARRAY[$2::text], $3, 'acct:1', $1, $2)`, token, who, op)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("check of (%s, %s, %s): %v, want a refusal", token, who, op, err)
		}
		return pe
	}
	for _, pe := range []*pgconn.PgError{call("5", "zombie", "op-z"), call("9999999999", "next", "op-h")} {
		for _, field := range []string{pe.Message, pe.Detail, pe.Hint} {
			if strings.Contains(field, tok) || strings.Contains(field, owner) {
				t.Errorf("refusal %s names the holder: message %q, detail %q, hint %q", pe.Code, pe.Message, pe.Detail, pe.Hint)
			}
		}
	}
	var se *fence.StaleError
	if err := s.ApplyBatch(ctx, f("acct:1", 5, "zombie", "op-z"), nil); !errors.As(err, &se) || se.StoredToken != 8231234567 || se.StoredOwner != owner {
		t.Fatalf("stale ApplyBatch: %#v, want the mark in its StaleError", err)
	}
	var ae *fence.AlreadyAppliedError
	if err := s.ApplyBatch(ctx, f("acct:1", 9999999999, "next", "op-h"), nil); !errors.As(err, &ae) ||
		ae.Record != (fence.Effect{OperationID: "op-h", Resource: "acct:1", Token: 8231234567, Owner: owner}) {
		t.Fatalf("repeated ApplyBatch: %#v, want the record in its AlreadyAppliedError", err)
	}
}
