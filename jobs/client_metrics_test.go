package jobs_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestClientExportsNoPoolSeries: an enqueue client exports its own series,
// never the series only pools set, which would read as a maintenance
// leader of 0 (FencedqNoMaintenanceLeader) and a Redis clock offset of 0
// that no one measured.
func TestClientExportsNoPoolSeries(t *testing.T) {
	rdb, ns := redistest.New(t)
	reg := prometheus.NewRegistry()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Registerer: reg})
	defer c.Close()
	if _, err := c.Enqueue(context.Background(), countArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	enqueued := false
	for _, f := range fams {
		switch f.GetName() {
		case "fencedq_jobs_enqueued_total":
			enqueued = true
		case "fencedq_maintenance_leader", "fencedq_maintenance_last_scan_timestamp_seconds", "fencedq_schedule_conflicts",
			"fencedq_redis_clock_offset_seconds", "fencedq_redis_clock_jumps_total", "fencedq_redis_may_evict",
			"fencedq_redis_replicas_missing":
			t.Errorf("a client exports %s", f.GetName())
		}
	}
	if !enqueued {
		t.Fatal("the client's enqueue was not counted")
	}
}
