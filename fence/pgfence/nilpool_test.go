package pgfence_test

import (
	"context"
	"errors"
	"testing"

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
