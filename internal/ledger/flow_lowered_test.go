package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// limitedJob is a job of queue q on limit key k, enqueued with max (a
// deployment lowering the limit enqueues the next jobs with a lower one).
func limitedJob(id string, max int) *ledger.NewJob {
	return &ledger.NewJob{ID: id, Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 1,
		Flow: &ledger.Flow{LimitKey: "k", LimitMax: max}}
}

// claimAdmitted claims every due job of queue q, failing on a job held back
// by its limit: the wake-ups admitted it, so no claim may park it again.
func claimAdmitted(t *testing.T, l *ledger.Ledger, q string) []ledger.Claimed {
	t.Helper()
	r, err := l.Claim(context.Background(), q, "p", time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Dropped) > 0 {
		t.Fatalf("the claim held back %+v: woken jobs were parked again", r.Dropped)
	}
	return r.Jobs
}

func ids(js []ledger.Claimed) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestLoweredLimitWakesOnlyJobsItAdmits: jobs enqueued with a limit of 3
// hold its key; the next ones, enqueued after the limit was lowered to 1,
// park. Releases wake only the jobs their own (lower) max admits: none
// while others still hold the key, then one at a time; no claim parks a
// woken job again.
func TestLoweredLimitWakesOnlyJobsItAdmits(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "low"})
	const q = "q"
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("h1", 3), limitedJob("h2", 3), limitedJob("h3", 3)}); err != nil {
		t.Fatal(err)
	}
	held := claimAdmitted(t, l, q)
	if len(held) != 3 {
		t.Fatalf("claimed %v, want the 3 jobs of the old limit", ids(held))
	}
	var parked []*ledger.NewJob
	for i := range 4 {
		parked = append(parked, limitedJob(fmt.Sprintf("p%d", i), 1))
	}
	if _, err := l.Insert(ctx, parked); err != nil {
		t.Fatal(err)
	}
	waiting := func() []string {
		t.Helper()
		w, err := rdb.ZRange(ctx, "low:{q}:limit:k:wait", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	due := func() int64 {
		t.Helper()
		n, err := rdb.ZCard(ctx, "low:{q}:pending").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if w := waiting(); len(w) != 4 {
		t.Fatalf("parked %v, want the 4 jobs of the lowered limit", w)
	}
	// Two permits still held: a job of max 1 is not admitted.
	succeed(t, l, q, held[:1])
	if n, w := due(), waiting(); n != 0 || len(w) != 4 {
		t.Fatalf("after one release %d jobs woken, %v parked; want none woken while 2 hold the key", n, w)
	}
	// The last two end together: one job is admitted, one is woken.
	succeed(t, l, q, held[1:])
	if n, w := due(), waiting(); n != 1 || len(w) != 3 {
		t.Fatalf("after the last releases %d jobs woken, %v parked; want 1 woken", n, w)
	}
	var order []string
	for range 4 {
		got := claimAdmitted(t, l, q)
		if len(got) != 1 {
			t.Fatalf("claimed %v after %v, want one job at a time", ids(got), order)
		}
		order = append(order, got[0].ID)
		succeed(t, l, q, got)
	}
	if want := []string{"p0", "p1", "p2", "p3"}; !slices.Equal(order, want) {
		t.Fatalf("ran %v, want %v (oldest first)", order, want)
	}
	if w := waiting(); len(w) != 0 {
		t.Fatalf("still parked: %v", w)
	}
}

// TestLoweredLimitJobNotStuckBehindLostPromise: a job of the lowered limit
// parks behind a holder and a promise whose job was then lost (its record
// gone with a failover). When the holder ends, the lost promise does not
// keep the parked job from waking: nothing would release it again.
func TestLoweredLimitJobNotStuckBehindLostPromise(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "lost"})
	const q = "q"
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("h", 2)}); err != nil {
		t.Fatal(err)
	}
	held := claimAdmitted(t, l, q)
	if len(held) != 1 {
		t.Fatalf("claimed %v", ids(held))
	}
	// promised a permit at its enqueue (1 of 2 held), then lost
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("ghost", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, "lost:{q}:job:ghost").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZRem(ctx, "lost:{q}:pending", "ghost").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("p", 1)}); err != nil {
		t.Fatal(err)
	}
	if w, err := rdb.ZRange(ctx, "lost:{q}:limit:k:wait", 0, -1).Result(); err != nil || !slices.Equal(w, []string{"p"}) {
		t.Fatalf("parked %v (%v), want p", w, err)
	}
	succeed(t, l, q, held)
	got := claimAdmitted(t, l, q)
	if !slices.Equal(ids(got), []string{"p"}) {
		t.Fatalf("after the holder ended claimed %v, want p (not stuck behind the lost promise)", ids(got))
	}
	succeed(t, l, q, got)
	if keys, err := rdb.Keys(ctx, "lost:{q}:limit:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("limit keys left: %v (%v)", keys, err)
	}
}
