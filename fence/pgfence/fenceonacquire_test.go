package pgfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/lease"
)

// TestFenceOnAcquireIgnoresOperationID: FenceOnAcquire records no
// operation, so an operation id PostgreSQL could not store (over the
// bound, a NUL byte, bytes that are not UTF-8) does not refuse the raise,
// and a refusal still names the fence as given.
func TestFenceOnAcquireIgnoresOperationID(t *testing.T) {
	_, s := setup(t)
	ctx := t.Context()
	for i, op := range []string{strings.Repeat("x", pgfence.MaxOperationIDLen+1), "a\x00b", "\xff"} {
		f := fence.Fence{Resource: "acct:1", Token: lease.Token(5 + 2*i), Owner: "o", OperationID: op}
		if err := s.FenceOnAcquire(ctx, f); err != nil {
			t.Fatalf("case %d: FenceOnAcquire: %v, want the mark raised", i, err)
		}
		if tok, _, err := s.HighWater(ctx, "acct:1"); err != nil || tok != f.Token {
			t.Fatalf("case %d: mark %d (%v), want %d", i, tok, err, f.Token)
		}
		old := f
		old.Token--
		var se *fence.StaleError
		if err := s.FenceOnAcquire(ctx, old); !errors.As(err, &se) || se.Fence != old || se.StoredToken != f.Token {
			t.Fatalf("case %d: lower token: %#v, want *StaleError for the fence given", i, err)
		}
	}
}
