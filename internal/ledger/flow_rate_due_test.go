package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateDeferredJobOnceDueWaitsForNoRate: a job its rate deferred says
// so (Get, List) until the start it was deferred to, Get giving that start
// as its due time; once that start has come, it is due like any job,
// waiting for a claim, and says nothing of its rate (not a "next start" in
// the past).
func TestRateDeferredJobOnceDueWaitsForNoRate(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rdue"})
	const q = "q"
	job := func(id string, per time.Duration) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: per}}
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a", time.Millisecond), job("b", time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 1 || len(r.Dropped) != 1 || r.Dropped[0].ID != "b" {
		t.Fatalf("claim %+v (%v), want a started and b deferred", r, err)
	}
	at, err := rdb.HGet(ctx, "rdue:{q}:job:b", "wait_at").Int64()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, err := l.ReadTime(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if now.UnixMilli() > at {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace's time did not pass %d", at)
		}
	}
	got, err := l.Get(ctx, q, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.WaitingFor != "" {
		t.Errorf("Get: b, due since its deferred start, waits for %q", got.WaitingFor)
	}
	list, err := l.List(ctx, q, ledger.Pending, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID == "b" && r.WaitingFor != "" {
			t.Errorf("List: b, due since its deferred start, waits for %q", r.WaitingFor)
		}
	}
	// a deferral still ahead is shown
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("c", time.Hour), job("d", time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r, err = l.Claim(ctx, q, "p", time.Minute, 10); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c", "d"} {
		got, err := l.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.Pending {
			continue
		}
		at, err := rdb.HGet(ctx, "rdue:{q}:job:"+id, "wait_at").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if got.WaitingFor == "" || got.RunAt.UnixMilli() != at {
			t.Errorf("Get: %s, deferred by its hourly rate to %d, waits for %q, due at %v (claim %+v)", id, at, got.WaitingFor, got.RunAt, r)
		}
	}
}
