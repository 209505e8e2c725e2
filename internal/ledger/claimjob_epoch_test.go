package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestClaimJobMintsInTheFencingEpoch: after a failover raised the fencing
// epoch, the claim of one job by id (fencedqtest's inline attempt) mints
// in the new epoch, as a pool's claim does: its token is not below the
// live ones.
func TestClaimJobMintsInTheFencingEpoch(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	const q = "default"
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions()})
	if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "before")}); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	before, err := l.Claim(ctx, q, "pool", time.Minute, 1)
	if err != nil || len(before.Jobs) != 1 {
		t.Fatalf("claim before the failover: %+v, %v", before, err)
	}
	f.Sync()
	f.KillPrimary()

	inline, native := newJob(q, "inline"), newJob(q, "native")
	untilRedialed(t, func() error { _, err := l.Insert(ctx, []*ledger.NewJob{inline, native}); return err })
	var byID *ledger.Claimed
	untilRedialed(t, func() error { byID, err = l.ClaimJob(ctx, q, inline.ID, "inline", time.Minute); return err })
	after, err := l.Claim(ctx, q, "pool", time.Minute, 1)
	if err != nil || len(after.Jobs) != 1 {
		t.Fatalf("claim after the failover: %+v, %v", after, err)
	}
	old, live := epoch.Of(uint64(before.Jobs[0].Token)), epoch.Of(uint64(after.Jobs[0].Token))
	if live <= old {
		t.Fatalf("the failover did not raise the epoch: %d then %d", old, live)
	}
	if got := epoch.Of(uint64(byID.Token)); got != live {
		t.Fatalf("the claim by id minted token %d in epoch %d, the pool's claim %d in epoch %d",
			byID.Token, got, after.Jobs[0].Token, live)
	}
}
