package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestDurableUnacknowledgedWritesAreNoRewind: in durable mode a write no
// replica acknowledged was never acknowledged to anyone, so a failover
// that loses it is no rewind, even after CheckRewinds read the primary
// holding it. A loss of acknowledged writes is still found by a read.
func TestDurableUnacknowledgedWritesAreNoRewind(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	const q = "default"
	var seen rewinds
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(), OnRewind: seen.add,
		Durability: durable.Options{Replicas: 1, Timeout: 200 * time.Millisecond}})

	if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "kept")}); err != nil {
		t.Fatal(err)
	}
	f.CutReplication()
	if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "unacknowledged")}); !errors.Is(err, ledger.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	if _, err := l.CheckRewinds(ctx); err != nil { // reads the primary, which holds the unacknowledged enqueue
		t.Fatal(err)
	}
	f.KillPrimary() // the promoted replica never had it

	checkAgain := func() {
		t.Helper()
		untilRedialed(t, func() error { _, err := l.CheckRewinds(ctx); return err })
	}
	checkAgain()
	if got := seen.all(); len(got) != 0 {
		t.Fatalf("a failover that lost only an unacknowledged write reported as a rewind: %+v", got)
	}
	if recs, err := l.Rewinds(ctx, q); err != nil || len(recs) != 0 {
		t.Fatalf("rewinds recorded: %+v, %v; want none", recs, err)
	}

	// The acknowledged enqueue's loss is one.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	checkAgain()
	if got := seen.all(); len(got) != 1 || got[0].LostEnqueues != 1 {
		t.Fatalf("after losing the acknowledged enqueue: rewinds %+v, want one with 1 enqueue lost", got)
	}
}
