package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// Release and Renew of a lease past its end, on Redis's clock moved ahead
// instead of a wait: an expired lease no one took since is freed; released
// once, a second Release is ErrNotHeld and a Renew is ErrLost saying it was
// released (not superseded: no other token holds it); the next holder's
// token is above it.
func TestReleaseAndRenewOfAnEndedLease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	c := srv.Client()
	ctx := t.Context()
	m := newManager(t, c)
	l, err := m.Acquire(ctx, "r", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(90 * time.Second) // past the deadline, within the key's linger
	if h, err := m.Holder(ctx, "r"); err != nil || h != nil {
		t.Fatalf("holder past the deadline: %+v, %v", h, err)
	}
	if err := m.Release(ctx, l); err != nil {
		t.Fatalf("release of an expired lease no one took: %v", err)
	}
	if err := m.Release(ctx, l); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	err = m.Renew(ctx, l, time.Minute)
	if !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "released") {
		t.Fatalf("renew after release: %v, want ErrLost saying released", err)
	}
	next, err := m.Acquire(ctx, "r", "b", time.Minute)
	if err != nil || next.Token <= l.Token {
		t.Fatalf("next acquire: %+v, %v; want a token above %d", next, err, l.Token)
	}
	err = m.Renew(ctx, l, time.Minute)
	if !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "superseded") {
		t.Fatalf("renew after a takeover: %v, want ErrLost saying superseded", err)
	}
	if err := m.Release(ctx, l); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release after a takeover: %v, want ErrNotHeld", err)
	}
	if h, _ := m.Holder(ctx, "r"); h == nil || h.Token != next.Token {
		t.Fatalf("stale calls changed the holder: %+v", h)
	}
}
