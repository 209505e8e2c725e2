package redisfence_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// A high-water hash whose token was edited by hand into something that is
// not a decimal uint64 is refused by every write with ErrMutation and
// reported by HighWater, naming the key: compared as it is, an empty token
// lets any token through, "1e3" lets 999 through, and a read of 0 would
// say the resource was never fenced. Nothing is written.
func TestCorruptedHighWaterTokenRefused(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	for _, bad := range []string{"", "1e3", "0", "007", "-5", " 9", "18446744073709551616", "x"} {
		r := "acct:" + bad
		hw := s.HighWaterKey(r)
		if err := c.HSet(ctx, hw, "token", bad, "owner", "w").Err(); err != nil {
			t.Fatal(err)
		}
		before := dumpKeys(t, c, s.Namespace())
		for name, write := range map[string]func() error{
			"Apply": func() error { return s.Apply(ctx, fz(r, 999, "w", "op"), redisfence.Set(s.DataKey(r, "v"), "1")) },
			"Guard": func() error {
				return s.Guard(ctx, fz(r, 999, "w", "op"), func(context.Context) error {
					t.Errorf("token %q: Guard ran its callback", bad)
					return nil
				})
			},
			"FenceOnAcquire": func() error { return s.FenceOnAcquire(ctx, fz(r, 999, "w", "")) },
		} {
			err := write()
			if !errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), hw) {
				t.Errorf("token %q: %s: %v, want ErrMutation naming %s", bad, name, err, hw)
			}
			if after := dumpKeys(t, c, s.Namespace()); !maps.Equal(before, after) {
				t.Errorf("token %q: %s changed the keys", bad, name)
			}
		}
		tok, _, err := s.HighWater(ctx, r)
		if !errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), hw) || tok != 0 {
			t.Errorf("token %q: HighWater = %d, %v; want ErrMutation naming %s", bad, tok, err, hw)
		}
	}
	// An owner without a token is no mark the store writes either.
	r := "acct:no-token"
	if err := c.HSet(ctx, s.HighWaterKey(r), "owner", "w").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, fz(r, 1, "w", "op2")); !errors.Is(err, redisfence.ErrMutation) {
		t.Errorf("mark without a token: Apply %v, want ErrMutation", err)
	}
	if _, _, err := s.HighWater(ctx, r); !errors.Is(err, redisfence.ErrMutation) {
		t.Errorf("mark without a token: HighWater %v, want ErrMutation", err)
	}
	// An applied effect record whose token was edited is reported too.
	r = "acct:effect"
	if err := s.Apply(ctx, fz(r, 5, "w", "op3")); err != nil {
		t.Fatal(err)
	}
	ek := s.EffectKey(r, "op3")
	if err := c.HSet(ctx, ek, "token", "five").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Applied(ctx, "op3"); !errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), ek) {
		t.Errorf("effect token edited: Applied %v, want ErrMutation naming %s", err, ek)
	}
	// Marks in order still work as the contract says, up to the last
	// epoch's tokens.
	r = "acct:ok"
	top := lease.Token(epoch.Floor(epoch.Max, time.Now().UnixMicro()))
	if err := s.FenceOnAcquire(ctx, fz(r, top, "w", "")); err != nil {
		t.Fatal(err)
	}
	if tok, _, err := s.HighWater(ctx, r); err != nil || tok != top {
		t.Fatalf("HighWater = %d, %v", tok, err)
	}
	if err := s.Apply(ctx, fz(r, 5, "w", "op4")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("stale write: %v, want ErrStale", err)
	}
}

// A Guard whose effect record is replaced by another type while its
// callback runs fails to record the operation with ErrMutation naming the
// key, not with a bare WRONGTYPE, and leaves the key as it found it.
func TestGuardFinishOnEffectKeyOfAnotherType(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r, op := "acct:1", "op:1"
	ek := s.EffectKey(r, op)
	err := s.Guard(ctx, fz(r, 5, "w", op), func(ctx context.Context) error {
		if err := c.Del(ctx, ek).Err(); err != nil {
			return err
		}
		return c.RPush(ctx, ek, "x").Err()
	})
	if !errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), ek) {
		t.Fatalf("Guard: %v, want ErrMutation naming %s", err, ek)
	}
	if typ := c.Type(ctx, ek).Val(); typ != "list" {
		t.Fatalf("effect key is a %s now, want the list left as it was", typ)
	}
}
