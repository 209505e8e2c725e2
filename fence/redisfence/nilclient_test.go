package redisfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
)

// TestNilClientIsRefused: New refuses a nil client, a typed nil pointer
// included, with ErrConfig instead of panicking on first use.
func TestNilClientIsRefused(t *testing.T) {
	var unset *redis.Client
	for name, c := range map[string]redis.UniversalClient{"nil": nil, "typed nil": unset} {
		if _, err := redisfence.New(c, redisfence.Config{}); !errors.Is(err, redisfence.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestNilOrZeroStoreIsRefused: every call on a nil or zero Store (one New
// did not make) fails with ErrConfig instead of panicking.
func TestNilOrZeroStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	f := fence.Fence{Resource: "r", Token: 1, Owner: "o", OperationID: "op"}
	for name, s := range map[string]*redisfence.Store{"nil": nil, "zero": {}} {
		calls := map[string]func() error{
			"Apply":          func() error { return s.Apply(ctx, f, redisfence.Set("fq:{r}:data:k", "v")) },
			"FenceOnAcquire": func() error { return s.FenceOnAcquire(ctx, f) },
			"Guard":          func() error { return s.Guard(ctx, f, func(context.Context) error { return nil }) },
			"HighWater":      func() error { _, _, err := s.HighWater(ctx, "r"); return err },
			"Applied":        func() error { _, _, err := s.Applied(ctx, "op"); return err },
			"AppliedOn":      func() error { _, _, err := s.AppliedOn(ctx, "r", "op"); return err },
		}
		for call, do := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s Store: %s panicked: %v", name, call, r)
					}
				}()
				if err := do(); !errors.Is(err, redisfence.ErrConfig) {
					t.Errorf("%s Store: %s: %v, want ErrConfig", name, call, err)
				}
			}()
		}
	}
}
