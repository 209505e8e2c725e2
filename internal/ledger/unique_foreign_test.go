package ledger_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A unique key whose holder's job key holds another type than a hash
// (written by hand, or by something else) holds nothing: an enqueue batch
// reaching it fails no job. A script's writes before an error stay, so
// failing there left the batch's earlier jobs written but in no index,
// never to run, their operation ids and unique keys taken.
func TestUniqueHolderWithForeignKeyFailsNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	states := []ledger.State{ledger.Pending, ledger.Running}
	unique := func(id string) *ledger.NewJob {
		j := newJob(q, "")
		j.ID, j.Unique = id, &ledger.Unique{Digest: "d", States: states}
		return j
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{unique("holder")}); err != nil {
		t.Fatal(err)
	}
	k := l.JobKey(q, "holder")
	rdb.Del(ctx, k)
	rdb.Set(ctx, k, "x", 0)

	plain := newJob(q, "op-before")
	ins, err := l.Insert(ctx, []*ledger.NewJob{plain, unique("next")})
	if err != nil || len(ins) != 2 || ins[0].Deduplicated || ins[1].Deduplicated || ins[1].JobID != "next" {
		t.Fatalf("a batch reaching a unique key whose holder's key holds no hash: %+v, %v; want both jobs created", ins, err)
	}
	ids, err := l.IDs(ctx, q, ledger.Pending, 0, 100)
	if err != nil || !slices.Contains(ids, plain.ID) || !slices.Contains(ids, "next") {
		t.Fatalf("pending index %v (%v), want %s and next in it", ids, err, plain.ID)
	}
	if dup, err := l.Insert(ctx, []*ledger.NewJob{unique("again")}); err != nil || !dup[0].Deduplicated || dup[0].JobID != "next" {
		t.Fatalf("the key's next enqueue: %+v, %v; want it deduplicated to next", dup[0], err)
	}
}
