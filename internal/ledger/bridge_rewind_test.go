package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestBridgeClaimDetectsARewind: a bridge's claims compare the queue's
// write sequence as a pool's claims do, so a bridge process whose only
// calls are claims finds a Redis that came back with older data.
func TestBridgeClaimDetectsARewind(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ctx := context.Background()
	const q = "default"
	var seen rewinds
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t), Name: "bridge", OnRewind: seen.add})
	deliver := func(id string) {
		t.Helper()
		dc, err := l.ClaimDelivery(ctx, q, ledger.Delivery{ID: id, Kind: "k", Payload: []byte(`{}`), MaxRetries: 3,
			Owner: "bridge", TTL: time.Minute, Bridge: "asynq"})
		if err != nil || dc.Status != ledger.DeliveryClaimed {
			t.Fatalf("delivery %s: %+v, %v; want claimed", id, dc, err)
		}
	}
	deliver("t1")
	deliver("t2")
	if got := seen.all(); len(got) != 0 {
		t.Fatalf("rewinds before any loss: %+v", got)
	}

	srv.Restart() // no persistence: every key is gone
	deliver("t3")
	got := seen.all()
	if len(got) != 1 || got[0].Queue != q || got[0].Found != 0 || got[0].LostEnqueues != 2 {
		t.Fatalf("the bridge reported rewinds %+v; want one of queue %s, its 2 jobs lost", got, q)
	}
	if recs, err := l.Rewinds(ctx, q); err != nil || len(recs) != 1 || recs[0].DetectedBy != "bridge" {
		t.Fatalf("recorded rewinds: %+v, %v; want one, by the bridge", recs, err)
	}
}
