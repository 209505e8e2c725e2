package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestReadsRefuseAPartitionTheQueueDoesNotHave: a queue's reads given a
// partition name the queue has in no layout (a mistyped one, or a plain
// queue's) fail with ErrInvalid instead of showing an empty queue, as
// Pause refuses it; its own partitions, current and earlier, read as they
// are.
func TestReadsRefuseAPartitionTheQueueDoesNotHave(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.SetPartitions(ctx, "orders", 4, "test", ""); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, partArgs{Account: "42"}, jobs.Queue("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, partArgs{Account: "plain"}, jobs.Queue("plain")); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func(q string) error{
		"Counts": func(q string) error { _, err := insp.Counts(ctx, q); return err },
		"Stats":  func(q string) error { _, err := insp.Stats(ctx, q); return err },
		"Paused": func(q string) error { _, err := insp.Paused(ctx, q); return err },
		"Limits": func(q string) error { _, err := insp.Limits(ctx, q); return err },
		"Groups": func(q string) error { _, err := insp.Groups(ctx, q); return err },
		"List": func(q string) error {
			_, err := insp.List(ctx, jobs.ListParams{Queue: q, State: jobs.Pending})
			return err
		},
		"FindOp": func(q string) error { _, err := insp.FindByOperationIn(ctx, q, res.OperationID); return err },
	}
	for _, bad := range []string{"orders#9", "orders#0.7", "plain#0", "nope#1.2"} {
		for name, read := range reads {
			if err := read(bad); !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid", name, bad, err)
			}
		}
	}
	// the partition holding the job (of the earlier layout) and a current
	// one read as they are
	for _, good := range []string{res.Partition, ledger.PartitionNames("orders", 2)[0]} {
		for name, read := range reads {
			if err := read(good); err != nil && !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("%s(%q) = %v", name, good, err)
			}
		}
	}
	if c, err := insp.Counts(ctx, res.Partition); err != nil || c[jobs.Pending] != 1 {
		t.Fatalf("Counts(%s) = %v, %v: want its pending job", res.Partition, c, err)
	}
}
