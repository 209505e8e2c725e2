package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestLapsedClaimDoesNotRunWithANewResourceToken: a worker frozen between
// its claim and the resource lease (here: its last confirmation is older
// than the lease TTL) gets the resource's newest token when it wakes, so it
// must not run the handler with it.
func TestLapsedClaimDoesNotRunWithANewResourceToken(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := NewPool(rdb, Config{Namespace: ns, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := ledger.Claimed{ID: "j1", Queue: "default", Token: 7, Kind: "k", Resource: "account:1"}
	fresh := p.newAttempt(context.Background(), c, time.Now())
	defer fresh.timer.Stop()
	if !p.acquireResource(fresh, "k") {
		t.Fatal("a fresh claim could not take a free resource")
	}
	_ = p.leases.Release(context.Background(), fresh.resLease)

	frozen := p.newAttempt(context.Background(), ledger.Claimed{ID: "j2", Queue: "default", Token: 8, Kind: "k", Resource: "account:1"},
		time.Now().Add(-2*time.Second)) // claimed two TTLs ago, never confirmed since
	defer frozen.timer.Stop()
	if p.acquireResource(frozen, "k") {
		t.Fatal("a lapsed claim went on to run its handler with the resource's newest token")
	}
	if frozen.resLease == nil {
		t.Fatal("the lease taken must be kept for the completer to release")
	}
}
