package asynqfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestConflictingMetricIsAnError: a Registerer that already holds a
// series of one of fencedq's names with other labels (an application's
// own, or an older version's) makes New, NewPool and NewClient fail
// naming the series, instead of panicking; two bridges and a pool on one
// Registerer share their series.
func TestConflictingMetricIsAnError(t *testing.T) {
	rdb, ns := redistest.New(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "fencedq_jobs_enqueued_total", Help: "an application's own"}))
	cfg := jobs.Config{Namespace: ns, Registerer: reg}
	const series = "fencedq_jobs_enqueued_total"
	b, err := asynqfence.New(rdb, cfg, asynqfence.Options{Registerer: reg})
	if b != nil || !errors.Is(err, asynqfence.ErrOptions) || !strings.Contains(err.Error(), series) {
		t.Errorf("New: bridge made %v, %v; want ErrOptions naming %s", b != nil, err, series)
	}
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Registerer: reg})
	if p != nil || !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), series) {
		t.Errorf("NewPool: pool made %v, %v; want ErrConfig naming %s", p != nil, err, series)
	}
	if err := jobs.NewClient(rdb, cfg).Err(); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), series) {
		t.Errorf("NewClient: Err() = %v, want ErrInvalid naming %s", err, series)
	}

	shared := prometheus.NewRegistry()
	for range 2 {
		if _, err := asynqfence.New(rdb, jobs.Config{Namespace: ns}, asynqfence.Options{Registerer: shared}); err != nil {
			t.Fatalf("a second bridge on one Registerer: %v", err)
		}
	}
	if _, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Registerer: shared}); err != nil {
		t.Fatalf("a pool beside bridges on one Registerer: %v", err)
	}
}
