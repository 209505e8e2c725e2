package dashboard_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
)

// A running job whose index entry and deadline were edited beyond any
// lease deadline (+inf, 1e300) is stuck for good (no lease runs out), and
// the stuck view lists it, over one queue and over all, with those due
// first; it read only entries scored up to now and never showed it.
func TestStuckListsARunningEntryScoredBeyondAnyDeadline(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range 3 {
		f.enqueue(echoArgs{N: i})
	}
	res, err := f.ledger.Claim(ctx, "default", "w", time.Minute, 3)
	must(t, err)
	if len(res.Jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(res.Jobs))
	}
	running := f.ledger.StateKey("default", ledger.Running)
	wedged := map[string]bool{}
	for i, score := range []float64{math.Inf(1), 1e300} {
		id := res.Jobs[i].ID
		wedged[id] = true
		must(t, f.rdb.ZAdd(ctx, running, redis.Z{Score: score, Member: id}).Err())
		must(t, f.rdb.HSet(ctx, f.ledger.JobKey("default", id), "deadline", "inf").Err())
	}
	h := f.handler(dashboard.Options{})
	for _, path := range []string{"/api/stuck", "/api/stuck?queue=default", "/api/stuck?limit=2"} {
		var v struct{ Jobs []struct{ ID string } }
		getJSON(t, h, path, &v)
		got := map[string]bool{}
		for _, j := range v.Jobs {
			got[j.ID] = true
		}
		if len(v.Jobs) != 2 || !got[res.Jobs[0].ID] || !got[res.Jobs[1].ID] {
			t.Errorf("%s: %+v; want the two wedged jobs %v", path, v.Jobs, wedged)
		}
	}
}
