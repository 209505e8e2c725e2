package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestHeartbeatDropsLapsedPools: pools that stopped beating without leaving
// (SIGKILL, OOM, a lost node) leave the pools index with the next live
// heartbeat, whether or not anyone reads Pools: a namespace whose pools are
// restarted with fresh ids for months keeps an index of its live pools only.
func TestHeartbeatDropsLapsedPools(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const ttl = 50 * time.Millisecond
	for i := range 100 {
		if err := l.Heartbeat(ctx, ledger.PoolInfo{ID: fmt.Sprintf("crashed-%d", i)}, ttl); err != nil {
			t.Fatal(err)
		}
	}
	// Long enough for their heartbeats to lapse (and twice more).
	time.Sleep(4 * ttl)
	if err := l.Heartbeat(ctx, ledger.PoolInfo{ID: "live"}, ttl); err != nil {
		t.Fatal(err)
	}
	ids, err := rdb.ZRange(ctx, ns+":pools", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "live" {
		t.Fatalf("pools index holds %d entries after the crashed pools' heartbeats lapsed (want only the live one): %q ...", len(ids), ids[:min(3, len(ids))])
	}
}

// TestLeaveAsLeavesAnotherInstancesHeartbeat: LeaveAs removes a pool's
// heartbeat and list entry only while the heartbeat is its instance's;
// another live pool's, sharing the ID, stays listed.
func TestLeaveAsLeavesAnotherInstancesHeartbeat(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if err := l.Heartbeat(ctx, ledger.PoolInfo{ID: "shared", Instance: "other"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.LeaveAs(ctx, "shared", "mine"); err != nil {
		t.Fatal(err)
	}
	if ps, err := l.Pools(ctx); err != nil || len(ps) != 1 || ps[0].Instance != "other" {
		t.Fatalf("another instance's heartbeat after LeaveAs: %+v, %v", ps, err)
	}
	if err := l.LeaveAs(ctx, "shared", "other"); err != nil {
		t.Fatal(err)
	}
	if ps, err := l.Pools(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("own heartbeat after LeaveAs: %+v, %v", ps, err)
	}
	if n, err := rdb.ZCard(ctx, ns+":pools").Result(); err != nil || n != 0 {
		t.Fatalf("list entries after LeaveAs: %d, %v", n, err)
	}
}
