package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateRedeferredJobKeepsItsPlace: a job deferred by its rate to a start
// is held back again when the start before it was made late (its pool
// claimed it after its due time), which leaves that start in the window.
// It keeps its place: due again at the earliest start the rate allows,
// ahead of the jobs deferred after it, and claimed before them; not sent
// behind every deferred job, which left its own start unused, ran a burst
// out of order and could hold one job back again and again. The rate
// holds throughout: no two starts within a period. Redis's clock is moved
// on by hand (the clock shim), so every claim is at a known time.
func TestRateRedeferredJobKeepsItsPlace(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "redefer"})
	const q, per = "q", 10 * time.Minute
	var jobs []*ledger.NewJob
	for _, id := range []string{"a", "b", "c", "d"} {
		jobs = append(jobs, &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: per}})
	}
	if _, err := l.Insert(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	claim := func(want string) {
		t.Helper()
		r, err := l.Claim(ctx, q, "p", time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, j := range r.Jobs {
			got += j.ID
		}
		if got != want {
			t.Fatalf("claimed %q (dropped %+v), want %q", got, r.Dropped, want)
		}
	}
	dueAt := func(id string) time.Time {
		t.Helper()
		ms, err := rdb.ZScore(ctx, "redefer:{q}:pending", id).Result()
		if err != nil {
			t.Fatalf("%s in the due index: %v", id, err)
		}
		return time.UnixMilli(int64(ms))
	}
	// Redis's clock is set to at (plus the test's own time since).
	clockAt := func(at time.Time) { srv.SetClockOffset(time.Until(at)) }
	claim("a") // b, c and d deferred, a period apart
	b, c, d := dueAt("b"), dueAt("c"), dueAt("d")
	if !b.Before(c) || !c.Before(d) {
		t.Fatalf("deferred to %v, %v, %v: want b, c, d in turn", b, c, d)
	}
	clockAt(b.Add(5 * time.Second)) // b's pool is late
	claim("b")
	clockAt(c.Add(time.Second)) // c's is not: b's start is still in the window
	claim("")
	if again := dueAt("c"); !again.Before(d) {
		t.Fatalf("c, held back again, is due at %v, behind d (due at %v), deferred after it", again, d)
	}
	clockAt(dueAt("c").Add(time.Millisecond))
	claim("c")
	clockAt(dueAt("d").Add(time.Millisecond))
	for {
		// d may be held back by c's start as c was by b's: it is then due
		// again once c's start leaves the window
		r, err := l.Claim(ctx, q, "p", time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) == 1 && r.Jobs[0].ID == "d" {
			break
		}
		if len(r.Jobs) != 0 {
			t.Fatalf("claimed %+v, want d or nothing", r.Jobs)
		}
		clockAt(dueAt("d").Add(time.Millisecond))
	}
	var starts []time.Time
	for _, id := range []string{"a", "b", "c", "d"} {
		rec, err := l.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, rec.Started)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < per {
			t.Errorf("starts %d and %d %v apart, rate 1 per %v", i-1, i, gap, per)
		}
	}
}
