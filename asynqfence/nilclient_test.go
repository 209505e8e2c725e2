package asynqfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestNilRedisClientIsRefused: New refuses a nil Redis client, a typed nil
// pointer included (for the ledger or for asynq's Redis), with ErrOptions
// naming it, instead of panicking on the first delivery.
func TestNilRedisClientIsRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	var unset *redis.Client
	cases := map[string]func() error{
		"nil": func() error {
			_, err := asynqfence.New(nil, jobs.Config{Namespace: ns}, asynqfence.Options{})
			return err
		},
		"typed nil": func() error {
			_, err := asynqfence.New(unset, jobs.Config{Namespace: ns}, asynqfence.Options{})
			return err
		},
		"typed nil asynq": func() error {
			_, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{Asynq: unset})
			return err
		},
	}
	for name, f := range cases {
		if err := f(); !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s: %v, want ErrOptions naming the nil client", name, err)
		}
	}
}
