package redisfence_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A store key that holds another type than the store writes there (edited
// by hand, or written by another program) refuses the write with
// ErrMutation and leaves nothing behind: no binding of the operation id, no
// claim counted, no mark raised. Before, the script failed on it with a
// bare WRONGTYPE error after the operation id was bound, or bound it and
// then failed to count the claim.
func TestStoreKeysOfAnotherTypeWriteNothing(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	for _, tc := range []struct {
		name  string
		plant func(r, op string) error
	}{
		{"high-water key a string", func(r, _ string) error { return c.Set(ctx, s.HighWaterKey(r), "x", 0).Err() }},
		{"effect key a list", func(r, op string) error { return c.RPush(ctx, s.EffectKey(r, op), "x").Err() }},
		{"binding key a list", func(_, op string) error { return c.RPush(ctx, s.IndexKey(op), "x").Err() }},
		{"claims key not an integer", func(_, op string) error { return c.Set(ctx, s.ClaimsKey(op), "x", 0).Err() }},
		{"claims key a hash", func(_, op string) error { return c.HSet(ctx, s.ClaimsKey(op), "f", "1").Err() }},
	} {
		r, op := "acct:"+tc.name, "op:"+tc.name
		for name, write := range map[string]func() error{
			"Apply": func() error { return s.Apply(ctx, fz(r, 5, "w", op), redisfence.Set(s.DataKey(r, "v"), "1")) },
			"Guard": func() error {
				return s.Guard(ctx, fz(r, 5, "w", op), func(context.Context) error {
					t.Errorf("%s: Guard ran its callback", tc.name)
					return nil
				})
			},
		} {
			if err := tc.plant(r, op); err != nil {
				t.Fatal(err)
			}
			before := dumpKeys(t, c, s.Namespace())
			if err := write(); !errors.Is(err, redisfence.ErrMutation) {
				t.Errorf("%s: %s: %v, want ErrMutation", tc.name, name, err)
			}
			if after := dumpKeys(t, c, s.Namespace()); !maps.Equal(before, after) {
				t.Errorf("%s: %s left keys %q, want %q unchanged", tc.name, name,
					slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
			}
			if err := c.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Set(ctx, s.HighWaterKey("acct:1"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.FenceOnAcquire(ctx, fz("acct:1", 5, "w", "")); !errors.Is(err, redisfence.ErrMutation) {
		t.Errorf("FenceOnAcquire on a high-water key that is a string: %v, want ErrMutation", err)
	}
	if v := c.Get(ctx, s.HighWaterKey("acct:1")).Val(); v != "x" {
		t.Errorf("FenceOnAcquire changed the key to %q", v)
	}
	// A store whose keys are in order still refuses as the contract says.
	if err := s.FenceOnAcquire(ctx, fz("acct:2", 5, "w", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, fz("acct:2", 4, "w", "op")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("stale write: %v, want ErrStale", err)
	}
}

// dumpKeys returns every key of the namespace with its serialised value.
func dumpKeys(t *testing.T, c *redis.Client, ns string) map[string]string {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// A read of a store key holding another type than the store writes there
// fails as a write on it does: with ErrMutation, naming the key, not with a
// bare WRONGTYPE error. So does a write whose operation id is bound to
// another resource whose effect key holds another type (its claim reads
// that record), writing nothing.
func TestStoreKeysOfAnotherTypeReadAsErrMutation(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	wantKey := func(name, key string, err error) {
		t.Helper()
		if !errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want ErrMutation naming %s", name, err, key)
		}
	}
	if err := c.Set(ctx, s.HighWaterKey("acct:1"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.HighWater(ctx, "acct:1")
	wantKey("HighWater", s.HighWaterKey("acct:1"), err)

	if err := c.RPush(ctx, s.EffectKey("acct:2", "op-1"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.AppliedOn(ctx, "acct:2", "op-1")
	wantKey("AppliedOn", s.EffectKey("acct:2", "op-1"), err)
	if err := c.Set(ctx, s.IndexKey("op-1"), "acct:2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Applied(ctx, "op-1")
	wantKey("Applied through the binding", s.EffectKey("acct:2", "op-1"), err)
	before := dumpKeys(t, c, s.Namespace())
	err = s.Apply(ctx, fz("acct:3", 5, "w", "op-1"), redisfence.Set(s.DataKey("acct:3", "v"), "1"))
	wantKey("Apply of an operation bound to acct:2", s.EffectKey("acct:2", "op-1"), err)
	if after := dumpKeys(t, c, s.Namespace()); !maps.Equal(before, after) {
		t.Errorf("Apply left keys %q, want %q unchanged", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}

	if err := c.RPush(ctx, s.IndexKey("op-2"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Applied(ctx, "op-2")
	wantKey("Applied", s.IndexKey("op-2"), err)

	// A legacy binding key (an operation id starting with "}") of another type.
	op := "}x{"
	if err := c.RPush(ctx, s.Namespace()+":fence:opindex:{"+op+"}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Applied(ctx, op)
	wantKey("Applied of a legacy binding", s.Namespace()+":fence:opindex:{"+op+"}", err)
}
