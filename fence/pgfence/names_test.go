package pgfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
)

// A resource, owner or operation id PostgreSQL's text cannot hold (a NUL
// byte, bytes that are not UTF-8: an HTTP header may carry them to
// httpfence's Guard) is refused as an invalid fence before the database is
// touched, not reported as a store failure whose outcome is unknown.
func TestTextPostgresCannotHoldRefusedAsInvalid(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	for i, f := range []fence.Fence{
		{Resource: "a\x00b", Token: 5, Owner: "o", OperationID: "op"},
		{Resource: "acct:\xff", Token: 5, Owner: "o", OperationID: "op"},
		{Resource: "acct:1", Token: 5, Owner: "o\x00", OperationID: "op"},
		{Resource: "acct:1", Token: 5, Owner: "o", OperationID: "op\xfe"},
	} {
		if err := s.Apply(ctx, f, nil); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d: Apply: %v, want ErrInvalid", i, err)
		}
		if err := s.ApplyBatch(ctx, f, &pgx.Batch{}); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d: ApplyBatch: %v, want ErrInvalid", i, err)
		}
		if err := s.Guard(ctx, f, func(ctx context.Context) error { return nil }); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d: Guard: %v, want ErrInvalid", i, err)
		}
		if f.OperationID == "op" {
			if err := s.FenceOnAcquire(ctx, f); !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("case %d: FenceOnAcquire: %v, want ErrInvalid", i, err)
			}
		}
	}
	if _, _, err := s.Applied(ctx, "op\xfe"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("Applied: %v, want ErrInvalid", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fencedq_fences) + (SELECT count(*) FROM fencedq_effects)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (%v), want none", n, err)
	}
}
