package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// TestKeepAliveOfALongerLease: a lease acquired for longer than the
// keep-alive's ttl, and held for a while, is still held: KeepAlive does not
// report it lost at once (its local deadline counted with the shorter ttl
// from the lease's last confirmation has passed, not the lease's), but
// renews it for ttl first and keeps it.
func TestKeepAliveOfALongerLease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	m := lease.NewManager(srv.Client(), lease.Config{Namespace: redistest.Namespace(t)})
	ctx := context.Background()
	l, err := m.Acquire(ctx, "report", "w1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lease.Age(l, 10*time.Second) // held 10s of its hour
	s, err := m.KeepAlive(ctx, l, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// With the bug the watchdog fires at once: its deadline passed 7s ago.
	select {
	case <-s.Context().Done():
		t.Fatalf("a lease held until %v reported lost at once: %v", l.Deadline, context.Cause(s.Context()))
	case <-time.After(500 * time.Millisecond):
	}
	if h, err := m.Holder(ctx, "report"); err != nil || h == nil || h.Token != l.Token {
		t.Fatalf("holder %+v, %v; want token %d", h, err, l.Token)
	}
	if s.Err() != nil || s.Lease().Deadline.After(l.Deadline.Add(-time.Minute)) {
		t.Fatalf("session: %v, deadline %v; want held, renewed for 3s", s.Err(), s.Lease().Deadline)
	}
}
