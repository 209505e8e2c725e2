package ledger_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// An operation key holding another type than a string (written by hand)
// names no job: an enqueue batch reaching it fails no job. A script's
// writes before an error stay, so failing there left the batch's earlier
// jobs written but in no index, never to run, and their enqueue made again
// deduplicated to them.
func TestForeignOperationKeyFailsNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	rdb.RPush(ctx, ns+":{"+q+"}:op:b/c", "x")
	first, second := newJob(q, "a/b"), newJob(q, "b/c")
	ins, err := l.Insert(ctx, []*ledger.NewJob{first, second})
	if err != nil || len(ins) != 2 || ins[0].Deduplicated || ins[1].Deduplicated {
		t.Fatalf("a batch reaching an operation key of another type: %+v, %v; want both jobs created", ins, err)
	}
	ids, err := l.IDs(ctx, q, ledger.Pending, 0, 100)
	if err != nil || !slices.Contains(ids, first.ID) || !slices.Contains(ids, second.ID) {
		t.Fatalf("pending index %v (%v), want both jobs in it", ids, err)
	}
	if again, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "b/c")}); err != nil || !again[0].Deduplicated || again[0].JobID != second.ID {
		t.Fatalf("operation b/c enqueued again: %+v, %v; want it deduplicated to %s", again[0], err, second.ID)
	}
}
