package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRefusedSetPartitionsLeavesNoPauseBehind: of a paused queue, a change
// of its partition count that Redis refuses (the layout changes list holds
// another type) leaves nothing in the partitions it would have added, so a
// later change to that count, after the queue was resumed, starts them
// running, not paused by the refused change.
func TestRefusedSetPartitionsLeavesNoPauseBehind(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.Pause(ctx, "orders", "test", "incident"); err != nil {
		t.Fatal(err)
	}
	changes := ns + ":partitions:{" + ns + ":partitions}:changes:orders"
	if err := rdb.Set(ctx, changes, "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err == nil {
		t.Fatal("SetPartitions over a changes key of another type succeeded")
	}
	keys, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ledger.PartitionNames("orders", 3) {
		for _, k := range keys {
			if strings.HasPrefix(k, ns+":{"+n+"}:") {
				t.Errorf("the refused change left key %q behind", k)
			}
		}
	}
	if err := rdb.Del(ctx, changes).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, "orders", "test", "over"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "orders", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range ledger.PartitionNames("orders", 3) {
		if p, err := insp.Paused(ctx, n); err != nil || p != nil {
			t.Errorf("partition %s of the resumed queue: paused %+v, %v; want running", n, p, err)
		}
	}
}
