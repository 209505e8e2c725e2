package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutputByTheQueuesName: the output of a partitioned queue's job is
// read with the queue's name (Result.Queue) as with its partition's, as
// Get is.
func TestOutputByTheQueuesName(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if _, err := c.SetPartitions(ctx, "default", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, outArgs{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.ClaimJob(ctx, res.Partition, res.JobID, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	actx, _ := ledger.WithAttempt(ctx, l, res.Partition, res.JobID, a.Token)
	if err := jobs.RecordOutput(actx, receipt{Amount: 3}); err != nil {
		t.Fatal(err)
	}
	raw, shown := ledger.OutputOf(actx)
	if _, err := l.Complete(ctx, res.Partition, []ledger.Completion{{ID: res.JobID, Token: a.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: raw, OutputDisplay: shown}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{res.Queue, res.Partition} {
		var out receipt
		if err := c.Output(ctx, q, res.JobID, &out); err != nil || out.Amount != 3 {
			t.Fatalf("output read with %s: %+v, %v", q, out, err)
		}
	}
}
