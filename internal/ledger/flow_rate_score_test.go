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

// A deferral a slow rate's long backlog puts years ahead is no edit: the
// claim that finds the window full keeps it (and the jobs it stands for
// keep their places), while one beyond a period per deferred job is
// dropped.
func TestRateDeferralYearsAheadOfALongBacklogIsKept(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rfar"})
	const q = "q"
	job := func(id string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: 24 * time.Hour}}
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a")}); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Claim(ctx, q, "p", time.Minute, 10); err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim %+v (%v), want a started", r, err)
	}
	// 1 000 jobs deferred before, one a day: the last 1 000 days ahead.
	held := "rfar:{q}:rate-held:api:x"
	day := float64(24 * time.Hour / time.Millisecond)
	now := float64(time.Now().UnixMilli())
	var zs []redis.Z
	for i := 1; i <= 1000; i++ {
		zs = append(zs, redis.Z{Score: now + float64(i)*day, Member: "h" + string(rune('a'+i%26)) + time.Duration(i).String()})
	}
	zs = append(zs, redis.Z{Score: 1e300, Member: "edited"})
	rdb.ZAdd(ctx, held, zs...)
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("b")}); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Claim(ctx, q, "p", time.Minute, 10); err != nil || len(r.Jobs) != 0 {
		t.Fatalf("claim %+v (%v), want b deferred", r, err)
	}
	if _, err := rdb.ZScore(ctx, held, "edited").Result(); err != redis.Nil {
		t.Fatalf("the deferral edited to 1e300 was kept (%v)", err)
	}
	if n, _ := rdb.ZCount(ctx, held, "-inf", "+inf").Result(); n != 1001 {
		t.Fatalf("%d deferrals held, want the backlog's 1 000 and b's", n)
	}
	if s, _ := rdb.ZScore(ctx, "rfar:{q}:pending", "b").Result(); s < now+999*day {
		t.Fatalf("b due %v days ahead, want behind the backlog of 1 000 days", (s-now)/day)
	}
}
