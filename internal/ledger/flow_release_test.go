package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestCompletionReleasesWaitedAndFreeKeysTogether: one completion ends the
// permits of keys nothing waits on and of a key a parked job waits on.
// The parked job is woken and claimed next; no permit is left behind.
func TestCompletionReleasesWaitedAndFreeKeysTogether(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rel"})
	const q = "q"
	job := func(id, key string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{LimitKey: key, LimitMax: 1}}
	}
	js := []*ledger.NewJob{job("a1", "busy"), job("a2", "busy")}
	for i := range 5 {
		js = append(js, job(fmt.Sprintf("f%d", i), fmt.Sprintf("free:%d", i)))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		if j.ID == "a2" {
			t.Fatal("a2 claimed while a1 holds the key's one permit")
		}
	}
	if len(r.Jobs) != 6 {
		t.Fatalf("claimed %d jobs, want 6 (a2 parked on its limit)", len(r.Jobs))
	}
	if n, err := rdb.ZCard(ctx, "rel:{q}:limit:busy:wait").Result(); err != nil || n != 1 {
		t.Fatalf("jobs parked on the busy key: %d (%v), want 1", n, err)
	}
	// The waited key's permit ends last, after the free keys were looked at.
	cs := make([]ledger.Completion, len(r.Jobs))
	for i, j := range r.Jobs {
		cs[len(cs)-1-i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
	}
	if cs[len(cs)-1].ID != "a1" {
		t.Fatalf("claim order %+v: want a1 first", r.Jobs)
	}
	if _, err := l.Complete(ctx, q, cs); err != nil {
		t.Fatal(err)
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || r.Jobs[0].ID != "a2" {
		t.Fatalf("after the completion claimed %+v; want the woken a2", r.Jobs)
	}
	cs = []ledger.Completion{{ID: "a2", Token: r.Jobs[0].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}}
	if _, err := l.Complete(ctx, q, cs); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "rel:{q}:limit:*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("limit keys left after every job ended: %v (%v)", keys, err)
	}
	if lim, _, err := l.Limits(ctx, q); err != nil || len(lim) != 0 {
		t.Fatalf("limits left: %+v, %v", lim, err)
	}
}

// TestRepairLimits: a permit whose holder's record was lost (a key deleted
// by hand, an eviction) is never released by a completion or an expiry, so
// the key's parked job would never run; RepairLimits ends it and wakes the
// parked job, and leaves the permit of a running holder alone.
func TestRepairLimits(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "lr"})
	const q = "q"
	job := func(id, key string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{LimitKey: key, LimitMax: 1}}
	}
	// a2 and b2 park at their enqueue: a1 and b1 are promised the permits
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a1", "lost"), job("a2", "lost"), job("b1", "kept"), job("b2", "kept")}); err != nil {
		t.Fatal(err)
	}
	if c := claimAll(t, l, q); len(c) != 2 {
		t.Fatalf("claimed %+v, want a1 and b1", c)
	}
	if err := rdb.Del(ctx, l.JobKey(q, "a1")).Err(); err != nil { // a1's record is lost
		t.Fatal(err)
	}
	if c := claimAll(t, l, q); len(c) != 0 {
		t.Fatalf("claimed %+v, want nothing (a2 and b2 parked)", c)
	}
	n, err := l.RepairLimits(ctx, q)
	if err != nil || n != 1 {
		t.Fatalf("repaired %d (%v), want 1: a1's permit", n, err)
	}
	if c := claimAll(t, l, q); len(c) != 1 || c[0].ID != "a2" {
		t.Fatalf("claimed %+v, want a2 (b1 still holds kept's permit)", c)
	}
	if n, err := l.RepairLimits(ctx, q); err != nil || n != 0 {
		t.Fatalf("a second repair ended %d permits (%v), want none", n, err)
	}
	st, err := l.Stats(ctx, q)
	if err != nil || st["limits_repaired"] != 1 {
		t.Fatalf("limits_repaired %d (%v), want 1", st["limits_repaired"], err)
	}
}

// TestRepairLimitsDropsLostPromiseOfBusyKey: a promise (a permit promised
// to a due job not yet claimed) whose job's record was lost is dropped by an
// enqueue or a wake-up only while nothing holds a permit of the key; on a
// key some job always holds, it would take one of the key's permits for
// ever, parking jobs the limit admits. RepairLimits drops it and wakes the
// parked job, and leaves the promise of a job still due alone.
func TestRepairLimitsDropsLostPromiseOfBusyKey(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "lp"})
	const q = "q"
	job := func(id string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{LimitKey: "busy", LimitMax: 2}}
	}
	// a and b are promised the key's two permits; a claim takes a's
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a"), job("b")}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 1)
	if err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != "a" {
		t.Fatalf("claimed %+v (%v), want a", r, err)
	}
	if err := rdb.Del(ctx, l.JobKey(q, "b")).Err(); err != nil { // b's record is lost
		t.Fatal(err)
	}
	if c := claimAll(t, l, q); len(c) != 0 { // drops b's due entry
		t.Fatalf("claimed %+v, want nothing", c)
	}
	// c parks behind a's permit and b's lost promise, though one permit is free
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("c")}); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.ZCard(ctx, "lp:{q}:limit:busy:wait").Result(); err != nil || n != 1 {
		t.Fatalf("jobs parked: %d (%v), want c", n, err)
	}
	n, err := l.RepairLimits(ctx, q)
	if err != nil || n != 1 {
		t.Fatalf("repaired %d (%v), want 1: b's lost promise", n, err)
	}
	if c := claimAll(t, l, q); len(c) != 1 || c[0].ID != "c" {
		t.Fatalf("claimed %+v, want c (a holds one permit of 2)", c)
	}
	// a ends: d is promised the permit it frees, e parks; the repair keeps
	// d's promise
	cs := []ledger.Completion{{ID: "a", Token: r.Jobs[0].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}}
	if _, err := l.Complete(ctx, q, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("d"), job("e")}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.RepairLimits(ctx, q); err != nil || n != 0 {
		t.Fatalf("a second repair ended %d (%v), want none", n, err)
	}
	want := "limit busy, 1 of 2 held, 1 promised to due jobs"
	if rec, err := l.Get(ctx, q, "e"); err != nil || rec.WaitingFor != want {
		t.Fatalf("e waits for %q (%v), want %q", rec.WaitingFor, err, want)
	}
	if c := claimAll(t, l, q); len(c) != 1 || c[0].ID != "d" {
		t.Fatalf("claimed %+v, want d", c)
	}
}
