package jobs_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestJobActionsRefuseAPartitionTheQueueDoesNotHave: reads of one job
// (Get, History, Output) and operator actions (Cancel, RunNow, Resolve and
// their Seen forms) given a partition name the queue has in no layout fail
// with ErrInvalid, as the queue's reads do, instead of ErrNotFound, and
// write nothing; a job missing from a partition the queue has is still
// ErrNotFound, and the job's own partition acts on it.
func TestJobActionsRefuseAPartitionTheQueueDoesNotHave(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	if _, err := c.SetPartitions(ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, partArgs{Account: "42"}, jobs.Queue("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, partArgs{Account: "plain"}, jobs.Queue("plain")); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		ks, err := rdb.Keys(ctx, ns+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ks)
		return ks
	}
	before := keys()
	seen := jobs.Seen{State: jobs.Pending, AnyToken: true}
	actions := map[string]func(q string) error{
		"Get":     func(q string) error { _, err := insp.Get(ctx, q, res.JobID); return err },
		"History": func(q string) error { _, err := insp.History(ctx, q, res.JobID); return err },
		"Output":  func(q string) error { var v map[string]any; return c.Output(ctx, q, res.JobID, &v) },
		"Cancel":  func(q string) error { _, err := c.Cancel(ctx, q, res.JobID, "alice", ""); return err },
		"CancelSeen": func(q string) error {
			_, err := c.CancelSeen(ctx, q, res.JobID, seen, "alice", "")
			return err
		},
		"RunNow": func(q string) error { _, err := c.RunNow(ctx, q, res.JobID, "alice", ""); return err },
		"RunNowSeen": func(q string) error {
			_, err := c.RunNowSeen(ctx, q, res.JobID, seen, "alice", "")
			return err
		},
		"Resolve": func(q string) error {
			_, err := c.Resolve(ctx, q, res.JobID, jobs.DecideDead, "alice", "")
			return err
		},
	}
	other := ledger.PartitionNames("orders", 2)[0]
	if res.Partition == other {
		other = ledger.PartitionNames("orders", 2)[1]
	}
	for _, bad := range []string{"orders#9", "orders#0.7", "plain#0", "nope#1.2"} {
		for name, act := range actions {
			if err := act(bad); !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid", name, bad, err)
			}
		}
	}
	for name, act := range actions {
		if err := act(other); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("%s(%q), a partition without the job = %v, want ErrNotFound", name, other, err)
		}
	}
	if after := keys(); !slices.Equal(before, after) {
		t.Fatalf("refused actions changed the keys: %v, then %v", before, after)
	}
	if _, err := c.Cancel(ctx, res.Partition, res.JobID, "alice", ""); err != nil {
		t.Fatalf("Cancel in the job's partition: %v", err)
	}
}
