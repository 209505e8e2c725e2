package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// limitOf returns Limits' entry for key k of queue q (nil: not listed).
func limitOf(t *testing.T, l *ledger.Ledger, q, k string) *ledger.LimitStatus {
	t.Helper()
	ls, _, err := l.Limits(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ls {
		if ls[i].Key == k {
			return &ls[i]
		}
	}
	return nil
}

// TestLimitsMaxIsTheOneInForce: after a deployment raises a key's limit
// from 2 to 5, a job of the new limit (w2) parks behind one of the old (w1:
// FIFO, ties in a millisecond by id).
// Limits shows the max the next wake-up is gated on (the oldest parked
// job's, 2: the key is at its limit), not the last parked job's (5, which
// showed free permits while jobs waited). Once nothing waits, it shows the
// max of the job admitted last, not of the last one that parked.
func TestLimitsMaxIsTheOneInForce(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "lmx"})
	const q = "q"
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("h1", 2), limitedJob("h2", 2)}); err != nil {
		t.Fatal(err)
	}
	held := claimAdmitted(t, l, q)
	if len(held) != 2 {
		t.Fatalf("claimed %v, want h1 and h2", ids(held))
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("w1", 2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("w2", 5)}); err != nil {
		t.Fatal(err)
	}
	s := limitOf(t, l, q, "k")
	if s == nil || s.Waiting != 2 || s.Held != 2 {
		t.Fatalf("Limits shows %+v, want 2 held and 2 waiting", s)
	}
	if s.Max != 2 || !s.AtLimit {
		t.Fatalf("Limits shows max %d (at limit %v) while %d hold the key and the oldest parked job's max is 2: want 2, at its limit",
			s.Max, s.AtLimit, s.Held)
	}
	// On key k2, a job parks under a limit of 2, is woken and claimed; then
	// jobs of a limit raised to 5 start without parking. With 4 holding the
	// key, the max in force is 5 (the job admitted last), not the 2 of the
	// job that parked: the key holds no job back.
	k2 := func(id string, max int) *ledger.NewJob {
		j := limitedJob(id, max)
		j.Flow.LimitKey = "k2"
		return j
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{k2("a1", 2), k2("a2", 2), k2("a3", 2)}); err != nil {
		t.Fatal(err)
	}
	a := claimAdmitted(t, l, q)
	if len(a) != 2 {
		t.Fatalf("claimed %v, want a1 and a2", ids(a))
	}
	succeed(t, l, q, a[:1])
	if got := claimAdmitted(t, l, q); len(got) != 1 || got[0].ID != "a3" {
		t.Fatalf("claimed %v, want a3", ids(got))
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{k2("b1", 5), k2("b2", 5)}); err != nil {
		t.Fatal(err)
	}
	if got := claimAdmitted(t, l, q); len(got) != 2 {
		t.Fatalf("claimed %v, want b1 and b2", ids(got))
	}
	if s := limitOf(t, l, q, "k2"); s != nil {
		t.Fatalf("Limits lists %+v: 4 of 5 held and nothing waits, so it holds no job back", s)
	}
}

// TestRatesMaxIsTheOneInForce: two jobs of 2 starts per hour start and a
// third is deferred; then a deployment lowers the rate to 1 per hour and a
// job of the new rate is deferred behind it. Limits shows the rate the next
// deferred start is admitted by (the oldest deferral's, 2 per hour), not
// the last deferred job's (1, which showed 2 starts over a max of 1).
func TestRatesMaxIsTheOneInForce(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rmx"})
	const q = "q"
	job := func(id string, max int) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "r", RateMax: max, RatePer: time.Hour}}
	}
	claim := func(want int, js ...*ledger.NewJob) {
		t.Helper()
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) != want {
			t.Fatalf("claimed %v, held back %+v; want %d started", ids(r.Jobs), r.Dropped, want)
		}
	}
	claim(2, job("s1", 2), job("s2", 2))
	claim(0, job("d1", 2))
	claim(0, job("d2", 1))
	_, rs, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Key != "r" || rs[0].Deferred != 2 || rs[0].Starts != 2 {
		t.Fatalf("Limits shows rates %+v, want key r with 2 starts and 2 deferred", rs)
	}
	if rs[0].Max != 2 || rs[0].Per != time.Hour {
		t.Fatalf("Limits shows %d per %v; want the rate the next deferred start is admitted by, 2 per hour", rs[0].Max, rs[0].Per)
	}
}
