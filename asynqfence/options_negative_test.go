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

// TestNegativeOptionsAreRefused: a negative duration or count is refused by
// New with ErrOptions naming the field, as worker.NewPool refuses them,
// instead of falling back to the default as zero does.
func TestNegativeOptionsAreRefused(t *testing.T) {
	rdb, ns := redistest.New(t)
	cfg := jobs.Config{Namespace: ns}
	for _, c := range []struct {
		opts asynqfence.Options
		name string
	}{
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
}
