package redisfence_test

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

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
