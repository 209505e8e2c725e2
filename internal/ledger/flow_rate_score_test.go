package ledger_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A rate key's start whose time was edited beyond any sane time (+inf,
// 1e300) must not wedge the key: it never leaves the window, so every job
// under the key was deferred to a start computed from it, never due.
func TestRateStartScoredBeyondAnyTimeDoesNotWedgeTheKey(t *testing.T) {
	for _, score := range []float64{math.Inf(1), 1e300} {
		rdb := redistest.Start(t, redistest.Options{}).Client()
		ctx := context.Background()
		l := ledger.New(rdb, ledger.Config{Namespace: "rinf"})
		const q = "q"
		job := func(id string) *ledger.NewJob {
			return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
				Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: time.Second}}
		}
		if _, err := l.Insert(ctx, []*ledger.NewJob{job("a")}); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Claim(ctx, q, "p", time.Minute, 10); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claim %+v (%v), want a started", r, err)
		}
		starts, _ := rdb.Keys(ctx, "rinf:{q}:rate:*").Result()
		for _, k := range starts {
			ms, _ := rdb.ZRange(ctx, k, 0, -1).Result()
			for _, m := range ms {
				rdb.ZAdd(ctx, k, redis.Z{Score: score, Member: m})
			}
		}
		if _, err := l.Insert(ctx, []*ledger.NewJob{job("b")}); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 10)
		if err != nil {
			t.Fatalf("score %v: claim: %v", score, err)
		}
		if len(r.Jobs) == 0 {
			at, _ := rdb.HGet(ctx, "rinf:{q}:job:b", "wait_at").Result()
			ps, _ := rdb.ZScore(ctx, "rinf:{q}:pending", "b").Result()
			if ps > float64(time.Now().Add(time.Hour).UnixMilli()) {
				t.Fatalf("score %v: b deferred to %q (pending score %v): never due", score, at, ps)
			}
		}
	}
}
