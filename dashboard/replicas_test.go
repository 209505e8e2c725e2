package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// The banner's API lists the live pools whose heartbeat says they miss
// Redis replicas their Durability requires, next to the ledger rewinds;
// a pool with enough replicas is not listed.
func TestBannerListsPoolsMissingReplicas(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for id, missing := range map[string]int{"pool-short": 2, "pool-ok": 0} {
		must(t, f.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: id, Host: "h", PID: 1, Queues: map[string]int{"default": 1},
			Concurrency: 1, Version: "v", Started: time.Now(), ReplicasMissing: missing, ReplicasRequired: 2}, time.Minute))
	}
	h := f.handler(dashboard.Options{})
	var rw struct {
		Rewinds  []any `json:"rewinds"`
		Replicas []struct {
			Pool     string `json:"pool"`
			Missing  int    `json:"missing"`
			Required int    `json:"required"`
		} `json:"replicas"`
	}
	getJSON(t, h, "/api/rewinds", &rw)
	if len(rw.Rewinds) != 0 || len(rw.Replicas) != 1 {
		t.Fatalf("banner: %+v", rw)
	}
	if r := rw.Replicas[0]; r.Pool != "pool-short" || r.Missing != 2 || r.Required != 2 {
		t.Fatalf("replica shortfall: %+v", r)
	}
}
