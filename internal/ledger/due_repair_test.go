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

// TestRepairDueScoredFarAhead: due-index entries edited far ahead are put
// back whatever their record says: one whose run_at was edited too, and
// one whose record is gone (for the claim to drop), go back at now; a job
// scheduled two years ahead is left alone, and a second pass finds nothing.
func TestRepairDueScoredFarAhead(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "dq"
	js := []*ledger.NewJob{
		{ID: "a", Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1},
		{ID: "b", Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1},
		{ID: "c", Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1, Delay: 2 * 365 * 24 * time.Hour},
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	p := ns + ":{" + q + "}:"
	rdb.ZAdd(ctx, p+"pending", redis.Z{Score: math.Inf(1), Member: "a"})
	rdb.Do(ctx, "ZADD", p+"pending", "1e300", "b")
	rdb.HSet(ctx, p+"job:b", "run_at", "1e300")
	rdb.ZAdd(ctx, p+"pending", redis.Z{Score: math.Inf(1), Member: "gone"})
	c, _ := rdb.ZScore(ctx, p+"pending", "c").Result()
	if n, err := l.RepairDue(ctx, q); err != nil || n != 3 {
		t.Fatalf("put back %d, %v; want 3 (a, b, gone)", n, err)
	}
	r, err := l.Claim(ctx, q, "w", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, j := range r.Jobs {
		got[j.ID] = true
	}
	if len(got) != 2 || !got["a"] || !got["b"] {
		t.Fatalf("claimed %v, want a and b", got)
	}
	if _, err := rdb.ZScore(ctx, p+"pending", "gone").Result(); err != redis.Nil {
		t.Fatalf("the entry of a gone record is still in the due index (%v)", err)
	}
	if s, err := rdb.ZScore(ctx, p+"pending", "c").Result(); err != nil || s != c {
		t.Fatalf("c scored %v (%v), was %v", s, err, c)
	}
	if n, err := l.RepairDue(ctx, q); err != nil || n != 0 {
		t.Fatalf("second pass: %d, %v; want none", n, err)
	}
}
