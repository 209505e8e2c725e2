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

// TestRetriedEnqueueResubmittedDueWhenItWas: an enqueue whose outcome was
// unknown wrote its delayed job; the retry that finds it comes later. After
// a loss the re-submitted job is due when the job was, its delay counted
// from the try that wrote it, not from the retry.
func TestRetriedEnqueueResubmittedDueWhenItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	const q = "default"
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(), Recent: 100,
		Durability: durable.Options{Replicas: 1, Timeout: 200 * time.Millisecond}})

	j := newJob(q, "delayed")
	j.Delay = time.Hour
	f.CutReplication()
	if _, err := l.Insert(ctx, []*ledger.NewJob{j}); !errors.Is(err, ledger.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with replication cut: %v, want ErrEnqueueUnknown", err)
	}
	orig, err := l.Get(ctx, q, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	const gap = 3 * time.Second
	time.Sleep(gap) // the retry comes this much later (not a wait for an outcome)
	f.HealReplication()
	f.Sync()
	if ins, err := l.Insert(ctx, []*ledger.NewJob{j}); err != nil || !ins[0].Deduplicated {
		t.Fatalf("the retry: %+v, %v; want the existing job, acknowledged", ins, err)
	}

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	if res, err := l.Resubmit(ctx); err != nil || len(res) != 1 || res[0].Restored != 1 {
		t.Fatalf("resubmitted %+v, %v; want the job restored", res, err)
	}
	back, err := l.Get(ctx, q, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Its acknowledgement is when the try that wrote it ended: after the
	// write, within the wait for replicas and a loaded machine's delays.
	if late := back.RunAt.Sub(orig.RunAt); late < -100*time.Millisecond || late >= gap/2 {
		t.Fatalf("re-submitted due at %v, %v after the job was due (%v); want when it was",
			back.RunAt, late, orig.RunAt)
	}
}
