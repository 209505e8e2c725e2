package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateDeferralOfPromisedJobWakesParkedJobs: a job under a limit and a
// full rate is promised the limit's only permit at its enqueue, and a job of
// the same limit parks behind that promise. The claim defers the first job
// by its rate (an hour), which gives up the promise: the parked job is woken
// at once, not left parked for the hour while the permit is free.
func TestRateDeferralOfPromisedJobWakesParkedJobs(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "defer"})
	const q = "q"
	job := func(id string, f *ledger.Flow) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f}
	}
	// The rate's one start per hour is taken.
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("r0", &ledger.Flow{RateKey: "r", RateMax: 1, RatePer: time.Hour})}); err != nil {
		t.Fatal(err)
	}
	if got := claimAdmitted(t, l, q); len(got) != 1 {
		t.Fatalf("claimed %v, want r0", ids(got))
	}
	both := &ledger.Flow{LimitKey: "k", LimitMax: 1, RateKey: "r", RateMax: 1, RatePer: time.Hour}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a", both)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{limitedJob("b", 1)}); err != nil {
		t.Fatal(err)
	}
	if w, err := rdb.ZRange(ctx, "defer:{q}:limit:k:wait", 0, -1).Result(); err != nil || !slices.Equal(w, []string{"b"}) {
		t.Fatalf("parked %v (%v), want b behind a's promise", w, err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 0 || len(r.Dropped) != 1 || r.Dropped[0].ID != "a" {
		t.Fatalf("claimed %v, held back %+v; want a deferred by its rate", ids(r.Jobs), r.Dropped)
	}
	got := claimAdmitted(t, l, q)
	if !slices.Equal(ids(got), []string{"b"}) {
		t.Fatalf("after a gave up its promise claimed %v, want b (the permit is free)", ids(got))
	}
	succeed(t, l, q, got)
	if w, err := rdb.ZCard(ctx, "defer:{q}:limit:k:wait").Result(); err != nil || w != 0 {
		t.Fatalf("%d jobs still parked (%v)", w, err)
	}
}
