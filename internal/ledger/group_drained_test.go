package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestGroupsHashGoesWithTheLastGroup: once the last group of a queue has no
// pending job left, by claims (a batch claim, and one that takes a group's
// last job through its head) or by a cancellation, the queue's groups hash
// is gone, its bookkeeping fields with it: queues whose tenants come and go
// keep nothing, and read as having no fair groups.
func TestGroupsHashGoesWithTheLastGroup(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "gq"
	gk := ns + ":{" + q + "}:groups"
	job := func(id, g string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1, Group: g}
	}
	gone := func(when string) {
		t.Helper()
		if h, err := rdb.HGetAll(ctx, gk).Result(); err != nil || len(h) != 0 {
			t.Fatalf("%s: the groups hash holds %v (%v), want it gone", when, h, err)
		}
	}
	var js []*ledger.NewJob
	for i := range 3 {
		js = append(js, job(fmt.Sprint("a", i), fmt.Sprint("tenant-", i%2)))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Claim(ctx, q, "w", time.Minute, 10); err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claimed %+v, %v; want the 3 jobs", r, err)
	}
	gone("after a claim took every grouped job")
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("b0", "tenant-x"), job("b1", "tenant-x")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r, err := l.Claim(ctx, q, "w", time.Minute, 1); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claimed %+v, %v; want one job", r, err)
		}
	}
	gone("after claims took a group's jobs one by one")
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("c0", "tenant-y"), job("c1", "tenant-y")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c0", "c1"} {
		if _, err := l.Cancel(ctx, q, id, "ops", ""); err != nil {
			t.Fatal(err)
		}
	}
	gone("after the group's jobs were cancelled")
	if has, err := l.HasFlow(ctx, []string{q}); err != nil || has[0] {
		t.Fatalf("HasFlow %v, %v: want false once no group has jobs", has, err)
	}
}
