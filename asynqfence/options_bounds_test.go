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

// TestOptionsOutOfBoundsAreRefused: a LeaseTTL below MinLeaseTTL (a lease
// of 0 whole milliseconds, expired as it is taken, renewed by a ticker of
// a third of it, which panics at 0), a RedeliverInterval below
// MinRedeliverInterval (a busy loop of Redis calls) and a negative
// duration or count (as worker.NewPool refuses them, instead of falling
// back to the default as zero does) are refused by New with ErrOptions
// naming the field.
func TestOptionsOutOfBoundsAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	for _, c := range []struct {
		opts asynqfence.Options
		name string
	}{
		{asynqfence.Options{LeaseTTL: 1}, "lease TTL"},
		{asynqfence.Options{LeaseTTL: time.Microsecond}, "lease TTL"},
		{asynqfence.Options{LeaseTTL: asynqfence.MinLeaseTTL - time.Millisecond}, "lease TTL"},
		{asynqfence.Options{LeaseTTL: asynqfence.MaxLeaseTTL + time.Millisecond}, "lease TTL"},
		{asynqfence.Options{RedeliverInterval: time.Nanosecond}, "redeliver interval"},
		{asynqfence.Options{RedeliverInterval: asynqfence.MinRedeliverInterval - 1}, "redeliver interval"},
		{asynqfence.Options{LeaseTTL: -time.Second}, "lease TTL"},
		{asynqfence.Options{RedeliverInterval: -time.Second}, "redeliver interval"},
		{asynqfence.Options{SafetyMargin: -time.Second}, "safety margin"},
		{asynqfence.Options{ReconcileTimeout: -time.Second}, "reconcile timeout"},
		{asynqfence.Options{MaxReconcileTries: -1}, "max reconcile tries"},
	} {
		b, err := asynqfence.New(rdb, cfg, c.opts)
		if b != nil || !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("New(%+v): bridge made %v, %v; want an error matching ErrOptions naming the %s", c.opts, b != nil, err, c.name)
		}
	}
	if _, err := asynqfence.New(rdb, cfg, asynqfence.Options{LeaseTTL: asynqfence.MinLeaseTTL, RedeliverInterval: asynqfence.MinRedeliverInterval}); err != nil {
		t.Fatalf("the minimums: %v", err)
	}
}
