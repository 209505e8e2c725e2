package lease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// Raise and Holder refuse a resource Acquire refuses, and Raise writes no
// key for it: a resource over MaxResourceLen must not leave a key behind.
func TestRaiseRefusesWhatAcquireRefuses(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	m := newManager(t, c)
	before, err := redistest.CountKeys(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", lease.MaxResourceLen+1)
	if err := m.Raise(ctx, long, 5); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Raise of a resource over MaxResourceLen: %v, want ErrInvalid", err)
	}
	if _, err := m.Holder(ctx, long); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Holder of a resource over MaxResourceLen: %v, want ErrInvalid", err)
	}
	if after, _ := redistest.CountKeys(ctx, c); after != before {
		t.Fatalf("bad input wrote keys: %d -> %d", before, after)
	}
}
