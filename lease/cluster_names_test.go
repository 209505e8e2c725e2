package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// TestClusterResourceStartingWithBrace: on Redis Cluster a resource whose
// hash tag would be empty (it starts with "}") is leased like any other:
// its lease key and epoch record share a slot, so acquire, renew, holder,
// raise and release work, and tokens rise across holdings.
func TestClusterResourceStartingWithBrace(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	c := redistest.StartCluster(t)
	m := newManager(t, c.Client())
	ctx := context.Background()
	for _, r := range []string{"}", "}x{", "}a}b"} {
		l, err := m.Acquire(ctx, r, "w1", time.Minute)
		if err != nil {
			t.Fatalf("acquire %q: %v", r, err)
		}
		if _, err := m.Acquire(ctx, r, "w2", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("second acquire %q: %v, want ErrHeld", r, err)
		}
		if err := m.Renew(ctx, l, time.Minute); err != nil {
			t.Fatalf("renew %q: %v", r, err)
		}
		if h, err := m.Holder(ctx, r); err != nil || h == nil || h.Token != l.Token {
			t.Fatalf("holder %q: %+v, %v", r, h, err)
		}
		if err := m.Release(ctx, l); err != nil {
			t.Fatalf("release %q: %v", r, err)
		}
		if err := m.Raise(ctx, r, l.Token+1000); err != nil {
			t.Fatalf("raise %q: %v", r, err)
		}
		next, err := m.Acquire(ctx, r, "w2", time.Minute)
		if err != nil || next.Token <= l.Token+1000 {
			t.Fatalf("acquire %q after raise: %+v, %v (first token %d)", r, next, err, l.Token)
		}
	}
}
