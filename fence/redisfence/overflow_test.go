package redisfence_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// Redis refuses INCRBY and HINCRBY on values it does not read as a 64-bit
// integer (leading zeros, "-0", 20 digits) and on sums that overflow; the
// script must find that before its first write, or the high-water mark,
// the effect record and the earlier mutations stay written while the
// later ones are not: a partial effect recorded as applied.
func TestMutationOutOfRangeWritesNothing(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r := "acct:1"
	k := func(name string) string { return s.DataKey(r, name) }
	if err := s.FenceOnAcquire(ctx, fz(r, 1, "w", "")); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		stored string
		op     func(key string) redisfence.Op
	}{
		{"9223372036854775807", func(key string) redisfence.Op { return redisfence.IncrBy(key, 1) }},
		{"-9223372036854775808", func(key string) redisfence.Op { return redisfence.IncrBy(key, -1) }},
		{"1", func(key string) redisfence.Op { return redisfence.IncrBy(key, math.MaxInt64) }},
		{"007", func(key string) redisfence.Op { return redisfence.IncrBy(key, 1) }},
		{"-0", func(key string) redisfence.Op { return redisfence.IncrBy(key, 1) }},
		{"99999999999999999999", func(key string) redisfence.Op { return redisfence.IncrBy(key, 1) }},
		{"9223372036854775808", func(key string) redisfence.Op { return redisfence.IncrBy(key, -1) }},
		{"9223372036854775807", func(key string) redisfence.Op { return redisfence.HIncrBy(key, "f", 1) }},
		{"-9223372036854775807", func(key string) redisfence.Op { return redisfence.HIncrBy(key, "f", -2) }},
		{"01", func(key string) redisfence.Op { return redisfence.HIncrBy(key, "f", 1) }},
	} {
		op := fmt.Sprint("op-", i)
		key := k(fmt.Sprint("n", i))
		if o := tc.op(key); o.String()[:2] == "HI" {
			_ = c.HSet(ctx, key, "f", tc.stored)
		} else {
			_ = c.Set(ctx, key, tc.stored, 0)
		}
		err := s.Apply(ctx, fz(r, 2, "w2", op), redisfence.Set(k("a"), "1"), tc.op(key))
		if !errors.Is(err, redisfence.ErrMutation) {
			t.Errorf("case %d (%s on %s): err = %v, want ErrMutation", i, tc.op(key), tc.stored, err)
		}
		if tok, _, _ := s.HighWater(ctx, r); tok != 1 {
			t.Fatalf("case %d: high-water %d, want 1", i, tok)
		}
		if _, ok, _ := s.Applied(ctx, op); ok {
			t.Fatalf("case %d: rejected op recorded as applied", i)
		}
		if c.Exists(ctx, k("a")).Val() != 0 {
			t.Fatalf("case %d: earlier mutation applied", i)
		}
	}
	// Sums at the very edges of the range still apply.
	_ = c.Set(ctx, k("edge"), "9223372036854775806", 0)
	_ = c.HSet(ctx, k("hedge"), "f", "-9223372036854775807")
	if err := s.Apply(ctx, fz(r, 3, "w3", "edge"),
		redisfence.IncrBy(k("edge"), 1), redisfence.HIncrBy(k("hedge"), "f", -1)); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, k("edge")).Val(); v != "9223372036854775807" {
		t.Errorf("INCRBY to the maximum: %q", v)
	}
	if v := c.HGet(ctx, k("hedge"), "f").Val(); v != "-9223372036854775808" {
		t.Errorf("HINCRBY to the minimum: %q", v)
	}
}
