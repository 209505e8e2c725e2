package redisfence_test

import (
	"errors"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// The store's own keys (the high-water mark, effect records, the
// operation index) share the resource's hash slot, but no mutation may
// write them: deleting or overwriting the mark would let a lower token
// write after a higher one, and a forged effect record would make an
// operation look applied.
func TestOpsOnTheStoresOwnKeysRefused(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r := "acct:1"
	if err := s.Apply(ctx, fz(r, 10, "new", "op-new"), redisfence.Set(s.DataKey(r, "v"), "new")); err != nil {
		t.Fatal(err)
	}
	for i, op := range []redisfence.Op{
		redisfence.Del(s.HighWaterKey(r)),
		redisfence.HSet(s.HighWaterKey(r), map[string]string{"token": "1"}),
		redisfence.Del(s.EffectKey(r, "op-new")),
		redisfence.HSet(s.EffectKey(r, "op-other"), map[string]string{"state": "applied"}),
		redisfence.Set(s.IndexKey(r), r), // an operation id equal to the resource shares its slot
	} {
		if err := s.Apply(ctx, fz(r, 11, "new", "op-x"), op); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d (%s): err = %v, want ErrInvalid", i, op, err)
		}
	}
	// Whatever the cases above did, a lower token must still be refused.
	if err := s.Apply(ctx, fz(r, 5, "old", "op-old"), redisfence.Set(s.DataKey(r, "v"), "stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 5 after token 10: err = %v, want ErrStale", err)
	}
	if v := c.Get(ctx, s.DataKey(r, "v")).Val(); v != "new" {
		t.Fatalf("value %q, want the newer write's", v)
	}
}
