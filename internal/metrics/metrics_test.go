package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/metrics"
)

// poolOnly are the series only a worker pool sets. Without labels, they
// export a sample once registered: an enqueue client or an asynq bridge
// that registered them would export a maintenance leader of 0 and a clock
// offset of 0 it never measured (a deployment of bridges alone, which
// need no pool, would look leaderless to FencedqNoMaintenanceLeader).
var poolOnly = []string{
	"fencedq_maintenance_leader", "fencedq_maintenance_last_scan_timestamp_seconds", "fencedq_schedule_conflicts",
	"fencedq_redis_clock_offset_seconds", "fencedq_redis_clock_jumps_total", "fencedq_redis_may_evict",
	"fencedq_redis_replicas_missing",
}

func families(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	return out
}

func TestClientsExportNoPoolSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewClient(reg)
	m.Enqueued.WithLabelValues("default").Inc()
	m.ReconcileErrors.Inc()
	got := families(t, reg)
	for _, name := range poolOnly {
		if got[name] {
			t.Errorf("a client exports %s", name)
		}
	}
	if !got["fencedq_jobs_enqueued_total"] || !got["fencedq_reconcile_errors_total"] {
		t.Fatalf("a client's own series are missing: %v", got)
	}
	// A pool sharing the Registerer adds them, and shares the rest.
	p := metrics.New(reg)
	if p.Enqueued != m.Enqueued {
		t.Fatal("the pool does not share the client's series")
	}
	got = families(t, reg)
	for _, name := range poolOnly {
		if !got[name] {
			t.Errorf("a pool does not export %s", name)
		}
	}
	// A client after the pool shares them too, and exports nothing twice.
	metrics.NewClient(reg)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
