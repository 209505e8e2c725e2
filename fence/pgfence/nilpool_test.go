package pgfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
)

// TestNilPoolIsRefused: every constructor and schema call given a nil pool
// fails with ErrOptions instead of panicking.
func TestNilPoolIsRefused(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func() error{
		"New":       func() error { _, err := pgfence.New(nil, pgfence.Options{}); return err },
		"NewOutbox": func() error { _, err := pgfence.NewOutbox(nil, pgfence.Options{}); return err },
		"Migrate":   func() error { return pgfence.Migrate(ctx, nil, pgfence.Options{}) },
		"Version":   func() error { _, err := pgfence.Version(ctx, nil, pgfence.Options{}); return err },
	}
	for name, f := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", name, r)
				}
			}()
			if err := f(); !errors.Is(err, pgfence.ErrOptions) {
				t.Errorf("%s: %v, want ErrOptions", name, err)
			}
		}()
	}
}

// TestNilOrZeroStoreIsRefused: every call on a nil or zero Store (one New
// did not make) fails with ErrOptions instead of panicking.
func TestNilOrZeroStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	f := fence.Fence{Resource: "r", Token: 1, Owner: "o", OperationID: "op"}
	tx := func(context.Context, pgx.Tx) error { return nil }
	for name, s := range map[string]*pgfence.Store{"nil": nil, "zero": {}} {
		calls := map[string]func() error{
			"Apply":           func() error { return s.Apply(ctx, f, tx) },
			"ApplyMulti":      func() error { return s.ApplyMulti(ctx, []fence.Fence{f}, tx) },
			"ApplyBatch":      func() error { return s.ApplyBatch(ctx, f, &pgx.Batch{}) },
			"ApplyMultiBatch": func() error { return s.ApplyMultiBatch(ctx, []fence.Fence{f}, &pgx.Batch{}) },
			"FenceTx":         func() error { return s.FenceTx(ctx, nil, f) },
			"FenceOnAcquire":  func() error { return s.FenceOnAcquire(ctx, f) },
			"Guard":           func() error { return s.Guard(ctx, f, func(context.Context) error { return nil }) },
			"Applied":         func() error { _, _, err := s.Applied(ctx, "op"); return err },
			"HighWater":       func() error { _, _, err := s.HighWater(ctx, "r"); return err },
			"PruneEffects":    func() error { _, err := s.PruneEffects(ctx, time.Hour); return err },
		}
		for call, do := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s Store: %s panicked: %v", name, call, r)
					}
				}()
				if err := do(); !errors.Is(err, pgfence.ErrOptions) {
					t.Errorf("%s Store: %s: %v, want ErrOptions", name, call, err)
				}
			}()
		}
	}
}
