package ledger_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateDeferredJobParkedOnItsLimitGivesUpItsDeferral: job b, under a
// limit and a rate, is deferred by its rate; when it is due again another
// job holds the limit's permit, so it parks on the limit. It no longer
// waits for its deferred start: its deferral is gone (Limits shows none),
// and once b starts, the next job the rate defers is due a period after
// b's start, not a period later still for b's old deferral.
func TestRateDeferredJobParkedOnItsLimitGivesUpItsDeferral(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rl"})
	const q, per = "q", time.Second
	job := func(id string, limit, rate bool) *ledger.NewJob {
		f := &ledger.Flow{}
		if limit {
			f.LimitKey, f.LimitMax = "acct", 1
		}
		if rate {
			f.RateKey, f.RateMax, f.RatePer = "prov", 1, per
		}
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f}
	}
	claim := func() *ledger.ClaimResult {
		t.Helper()
		r, err := l.Claim(ctx, q, "p", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a", false, true), job("b", true, true)}); err != nil {
		t.Fatal(err)
	}
	if r := claim(); len(r.Jobs) != 1 || r.Jobs[0].ID != "a" || len(r.Dropped) != 1 || r.Dropped[0].State != "rate:" {
		t.Fatalf("claim %+v; want a started, b deferred by its rate", r)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("e", true, false)}); err != nil {
		t.Fatal(err)
	}
	r := claim()
	if len(r.Jobs) != 1 || r.Jobs[0].ID != "e" {
		t.Fatalf("claim %+v; want e started, holding acct's permit", r)
	}
	holder := r.Jobs
	deadline := time.Now().Add(30 * time.Second)
	for parked := false; !parked; {
		for _, d := range claim().Dropped {
			if d.ID == "b" && d.State == "limit:" {
				parked = true
			}
		}
		if !parked && time.Now().After(deadline) {
			t.Fatal("b not parked on its limit 30s after its deferral")
		}
		time.Sleep(20 * time.Millisecond) // polling for b's due time, not an assertion
	}
	if _, err := rdb.ZScore(ctx, "rl:{q}:rate-held:prov", "b").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("b, parked on its limit, is still among prov's deferrals (%v)", err)
	}
	_, rates, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rates {
		if r.Deferred != 0 {
			t.Errorf("rate %+v; want no deferred job", r)
		}
	}

	succeed(t, l, q, holder)
	if r := claim(); len(r.Jobs) != 1 || r.Jobs[0].ID != "b" {
		t.Fatalf("claim %+v; want b started once e released the permit", r)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("y", false, true)}); err != nil {
		t.Fatal(err)
	}
	if r := claim(); len(r.Jobs) != 0 || len(r.Dropped) != 1 || r.Dropped[0].ID != "y" {
		t.Fatalf("claim %+v; want y deferred (b started within the period)", r)
	}
	w, err := rdb.ZRangeWithScores(ctx, "rl:{q}:rate:prov", -1, -1).Result()
	if err != nil || len(w) != 1 {
		t.Fatalf("rate window %+v (%v)", w, err)
	}
	at, err := rdb.HGet(ctx, "rl:{q}:job:y", "wait_at").Result()
	if err != nil {
		t.Fatal(err)
	}
	atMS, _ := strconv.ParseInt(at, 10, 64)
	if want := int64(w[0].Score) + per.Milliseconds(); atMS != want {
		t.Errorf("y deferred to %d, want %d (a period after b's start): %v later", atMS, want, time.Duration(atMS-want)*time.Millisecond)
	}
}
