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
