package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// TestResubmitKeepsToThePoolsRetention: a pool keeps finished jobs
// shorter than the client's retention. After a rewind the client does not
// re-submit a job of its record that finished and expired by the pool's
// retention (it would run again); a job the rewind lost comes back.
func TestResubmitKeepsToThePoolsRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: f.ClientOptions(), Recent: 100})
	// Long enough that the failover below takes less than half of it: the
	// job lost in it is younger than that when re-submitted.
	const keep = 10 * time.Second
	pool := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: f.ClientOptions(), Retention: keep})

	done := newJob(q, "done")
	if _, err := client.Insert(ctx, []*ledger.NewJob{done}); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Claim(ctx, q, "pool", time.Minute, 1)
	if err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if _, err := pool.Complete(ctx, q, []ledger.Completion{{ID: done.ID, Token: c.Jobs[0].Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded}}}); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Wait(rdb, ns, keep+testsignal.Timeout(), func() bool {
		_, err := client.Get(ctx, q, done.ID)
		return errors.Is(err, ledger.ErrNotFound)
	}); err != nil {
		t.Fatalf("the finished job never expired: %v", err)
	}
	f.Sync()
	f.CutReplication()
	lost := newJob(q, "lost")
	if _, err := client.Insert(ctx, []*ledger.NewJob{lost}); err != nil {
		t.Fatal(err)
	}
	f.KillPrimary() // the promoted replica never had the second enqueue

	var res []ledger.Resubmitted
	untilRedialed(t, func() error { res, err = client.Resubmit(ctx); return err })
	if len(res) != 1 || res[0].Restored != 1 {
		t.Fatalf("resubmitted %+v, want the lost job only", res)
	}
	if _, err := client.Get(ctx, q, lost.ID); err != nil {
		t.Fatalf("the lost job was not re-submitted: %v", err)
	}
	if rec, err := client.Get(ctx, q, done.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the job that finished and expired came back: %+v, %v", rec, err)
	}
}
