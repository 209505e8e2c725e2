package ledger_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestLimitsAtLimitCountsPromisedPermits: a key whose permits are all
// promised to due jobs not yet claimed parks its next jobs as held ones
// do, so the Limits read lists it at its limit (it said not at its limit
// while its parked job waited behind the promise).
func TestLimitsAtLimitCountsPromisedPermits(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "lprom"})
	const q = "q"
	job := func(id, key string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{LimitKey: key, LimitMax: 1}}
	}
	// a's permit is promised at its enqueue; b parks behind it
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a", "export:x"), job("b", "export:x")}); err != nil {
		t.Fatal(err)
	}
	lim, _, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(lim) != 1 || lim[0].Key != "export:x" || lim[0].Promised != 1 || lim[0].Held != 0 || lim[0].Waiting != 1 {
		t.Fatalf("limits %+v, want export:x with 1 promised and 1 waiting", lim)
	}
	if !lim[0].AtLimit {
		t.Errorf("export:x, its one permit promised and a job parked behind it, is not at its limit: %+v", lim[0])
	}
}
