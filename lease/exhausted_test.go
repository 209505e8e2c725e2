package lease_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// A counter raised to the last token mints it once; every later Acquire
// fails with ErrExhausted (not ErrHeld, so AcquireWait returns at once),
// writing nothing.
func TestExhaustedCounterFailsWithASentinel(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	m := newManager(t, c)
	if err := m.Raise(ctx, "r", math.MaxUint64-1); err != nil {
		t.Fatal(err)
	}
	last, err := m.Acquire(ctx, "r", "a", time.Minute)
	if err != nil || last.Token != math.MaxUint64 {
		t.Fatalf("acquire after the raise: %+v, %v; want the last token", last, err)
	}
	if err := m.Release(ctx, last); err != nil {
		t.Fatal(err)
	}
	before := c.Get(ctx, m.Key("r")).Val()
	if _, err := m.Acquire(ctx, "r", "b", time.Minute); !errors.Is(err, lease.ErrExhausted) {
		t.Fatalf("acquire with no token left: %v, want ErrExhausted", err)
	}
	if _, err := m.AcquireWait(ctx, "r", "b", time.Minute); !errors.Is(err, lease.ErrExhausted) || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireWait with no token left: %v, want ErrExhausted", err)
	}
	if after := c.Get(ctx, m.Key("r")).Val(); after != before {
		t.Fatalf("a refused acquire changed the key: %q -> %q", before, after)
	}
}
