package pgfence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/lease"
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
	for _, r := range []string{"a\x00b", "acct:\xff"} {
		if _, _, err := s.HighWater(ctx, r); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("HighWater(%q): %v, want ErrInvalid", r, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fencedq_fences) + (SELECT count(*) FROM fencedq_effects)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (%v), want none", n, err)
	}
}

// A resource or operation id longer than the tables' indexes can hold is
// refused as an invalid fence before the database is touched; PostgreSQL
// would refuse it with an index-size error, which reads as a store failure
// whose outcome is unknown (an HTTP guard answered 503, retry). A resource
// has the lease's bound, as in package redisfence; names at the bounds
// apply, however incompressible.
func TestOverlongNamesRefusedAsInvalid(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rand.IntN(26))
		}
		return string(b)
	}
	for i, f := range []fence.Fence{
		{Resource: random(lease.MaxResourceLen + 1), Token: 5, Owner: "o", OperationID: "op"},
		{Resource: "acct:1", Token: 5, Owner: "o", OperationID: random(pgfence.MaxOperationIDLen + 1)},
		{Resource: random(4000), Token: 5, Owner: "o", OperationID: "op"},
		{Resource: "acct:1", Token: 5, Owner: "o", OperationID: random(4000)},
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
	var n int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fencedq_fences) + (SELECT count(*) FROM fencedq_effects)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (%v), want none", n, err)
	}
	res, op := "a"+random(lease.MaxResourceLen-1), random(pgfence.MaxOperationIDLen)
	if err := s.ApplyMulti(ctx, []fence.Fence{
		{Resource: res, Token: 5, Owner: "o", OperationID: op},
		{Resource: "b" + res[1:], Token: 5, Owner: "o", OperationID: op}, // another resource of the same length
	}, nil); err != nil {
		t.Fatalf("ApplyMulti at the bounds: %v", err)
	}
	if err := s.ApplyBatch(ctx, fence.Fence{Resource: res, Token: 6, Owner: "o", OperationID: op[1:] + "x"}, nil); err != nil {
		t.Fatalf("ApplyBatch at the bounds: %v", err)
	}
	if _, ok, err := s.Applied(ctx, op); err != nil || !ok {
		t.Fatalf("Applied at the bounds: %v, %v", ok, err)
	}
}
