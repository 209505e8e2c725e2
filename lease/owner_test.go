package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// An owner is written into the lease key by every acquire and renew and
// read back by every script on the resource: one of megabytes would stall
// Redis for every client on each call (and outlast a short TTL in its own
// acquire). Every call refuses an owner over MaxOwnerLen, and one naming
// a resource over MaxResourceLen, before anything is sent.
func TestOwnerAndResourceLengthsBounded(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	m := newManager(t, c)
	long := strings.Repeat("o", lease.MaxOwnerLen+1)

	before, err := redistest.CountKeys(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "r", long, time.Minute); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("acquire with a %d-byte owner: want ErrInvalid, got %v", len(long), err)
	}
	if after, _ := redistest.CountKeys(ctx, c); after != before {
		t.Fatalf("refused acquire wrote keys: %d -> %d", before, after)
	}

	l, err := m.Acquire(ctx, "r", strings.Repeat("o", lease.MaxOwnerLen), time.Minute)
	if err != nil {
		t.Fatalf("acquire with a %d-byte owner: %v", lease.MaxOwnerLen, err)
	}
	forged := *l
	forged.Owner = long
	if err := m.Renew(ctx, &forged, time.Minute); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("renew with a long owner: want ErrInvalid, got %v", err)
	}
	if _, err := m.KeepAlive(ctx, &forged, time.Minute); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("keep-alive with a long owner: want ErrInvalid, got %v", err)
	}
	if err := m.Release(ctx, &forged); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("release with a long owner: want ErrInvalid, got %v", err)
	}
	forged = *l
	forged.Resource = strings.Repeat("r", lease.MaxResourceLen+1)
	if err := m.Release(ctx, &forged); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("release of a long resource: want ErrInvalid, got %v", err)
	}
	if h, err := m.Holder(ctx, "r"); err != nil || h == nil || h.Token != l.Token {
		t.Fatalf("refused calls changed the holder: %+v, %v", h, err)
	}
	if err := m.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
}
