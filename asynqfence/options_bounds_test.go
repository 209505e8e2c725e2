package asynqfence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestTinyLeaseTTLAndRedeliverIntervalAreRefused: a LeaseTTL below
// MinLeaseTTL (a lease of 0 whole milliseconds, expired as it is taken,
// renewed by a ticker of a third of it, which panics at 0) and a
// RedeliverInterval below MinRedeliverInterval (a busy loop of Redis
// calls) are refused by New with ErrOptions naming the field.
func TestTinyLeaseTTLAndRedeliverIntervalAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	for _, c := range []struct {
		opts asynqfence.Options
		name string
	}{
		{asynqfence.Options{LeaseTTL: 1}, "lease TTL"},
		{asynqfence.Options{LeaseTTL: time.Microsecond}, "lease TTL"},
		{asynqfence.Options{LeaseTTL: asynqfence.MinLeaseTTL - time.Millisecond}, "lease TTL"},
		{asynqfence.Options{RedeliverInterval: time.Nanosecond}, "redeliver interval"},
		{asynqfence.Options{RedeliverInterval: asynqfence.MinRedeliverInterval - 1}, "redeliver interval"},
	} {
		b, err := asynqfence.New(rdb, cfg, c.opts)
		if b != nil || !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("New(LeaseTTL %v, RedeliverInterval %v): bridge made %v, %v; want an error matching ErrOptions naming the %s", c.opts.LeaseTTL, c.opts.RedeliverInterval, b != nil, err, c.name)
		}
	}
	if _, err := asynqfence.New(rdb, cfg, asynqfence.Options{LeaseTTL: asynqfence.MinLeaseTTL, RedeliverInterval: asynqfence.MinRedeliverInterval}); err != nil {
		t.Fatalf("the minimums: %v", err)
	}
}
