package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// TestNilRedisClientIsRefusedClearly: a manager built over a nil Redis
// client (a nil interface, or a typed nil pointer) refuses every call with
// an error matching ErrInvalid that names the mistake, instead of
// panicking on first use.
func TestNilRedisClientIsRefusedClearly(t *testing.T) {
	ctx := context.Background()
	var unset *redis.Client
	for name, rdb := range map[string]redis.UniversalClient{"nil": nil, "typed nil": unset} {
		m := lease.NewManager(rdb, lease.Config{})
		l := &lease.Lease{Resource: "r", Owner: "o", Token: 1}
		calls := map[string]func() error{
			"Acquire":     func() error { _, err := m.Acquire(ctx, "r", "o", time.Second); return err },
			"AcquireWait": func() error { _, err := m.AcquireWait(ctx, "r", "o", time.Second); return err },
			"Renew":       func() error { return m.Renew(ctx, l, time.Second) },
			"Release":     func() error { return m.Release(ctx, l) },
			"Raise":       func() error { return m.Raise(ctx, "r", 5) },
			"Holder":      func() error { _, err := m.Holder(ctx, "r"); return err },
			"KeepAlive":   func() error { _, err := m.KeepAlive(ctx, l, time.Second); return err },
		}
		for call, f := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s client: %s panicked: %v", name, call, r)
					}
				}()
				if err := f(); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "nil") {
					t.Errorf("%s client: %s: %v, want ErrInvalid naming the nil Redis client", name, call, err)
				}
			}()
		}
	}
}

// TestNilOrZeroManagerIsRefused: a Manager NewManager did not make (a nil
// pointer, such as an unset field, or a zero value) refuses every call with
// an error matching ErrInvalid that says to use NewManager, instead of
// panicking; one NewManager made over a real Redis acquires.
func TestNilOrZeroManagerIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	var unset *lease.Manager
	l := &lease.Lease{Resource: "r", Owner: "o", Token: 1}
	for name, m := range map[string]*lease.Manager{"nil": unset, "zero": {}} {
		calls := map[string]func() error{
			"Acquire":     func() error { _, err := m.Acquire(ctx, "r", "o", time.Second); return err },
			"AcquireWait": func() error { _, err := m.AcquireWait(ctx, "r", "o", time.Second); return err },
			"Renew":       func() error { return m.Renew(ctx, l, time.Second) },
			"Release":     func() error { return m.Release(ctx, l) },
			"Raise":       func() error { return m.Raise(ctx, "r", 5) },
			"Holder":      func() error { _, err := m.Holder(ctx, "r"); return err },
			"KeepAlive":   func() error { _, err := m.KeepAlive(ctx, l, time.Second); return err },
		}
		for call, f := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s manager: %s panicked: %v", name, call, r)
					}
				}()
				if err := f(); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "NewManager") {
					t.Errorf("%s manager: %s: %v, want ErrInvalid saying to use NewManager", name, call, err)
				}
			}()
		}
	}
	m := lease.NewManager(rdb, lease.Config{Namespace: ns})
	if _, err := m.Acquire(ctx, "r", "o", time.Second); err != nil {
		t.Fatalf("a manager NewManager made: Acquire: %v", err)
	}
}
