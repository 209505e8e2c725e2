package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// moveSlot migrates every key of slot to the master at dst (CLUSTER SETSLOT
// IMPORTING and MIGRATING, MIGRATE key by key, SETSLOT NODE on every
// master), as redis-cli --cluster reshard does.
func moveSlot(t *testing.T, cl *redistest.Cluster, cc *redis.ClusterClient, slot int, src, dst string) {
	t.Helper()
	ctx := context.Background()
	node := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	sc, dc := node(src), node(dst)
	sid, err := sc.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	did, err := dc.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	must(dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", sid).Err())
	must(sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", did).Err())
	host, port, _ := strings.Cut(dst, ":")
	for {
		keys, err := sc.Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 100).StringSlice()
		must(err)
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			must(sc.Do(ctx, "MIGRATE", host, port, k, 0, 5000).Err())
		}
	}
	for _, n := range cl.Nodes {
		must(node(n.Addr).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", did).Err())
	}
	cc.ReloadState(ctx)
}

// A queue's slot moves to another master and back (a reshard undone): the
// other master's tenure minted in a higher epoch, so the returning master
// starts a new tenure above it. Before, it minted again in the epoch it had
// recorded for itself, below every token minted meanwhile: a job run
// again under an operation id reused after retention (the same job id, so
// the same fence resource) was refused by storage that had seen the higher
// token, and a zombie of the other tenure out-ranked it.
func TestSlotMovedBackMintsAboveTheTenureBetween(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t)
	cc := cl.Client()
	f := newFixture(t, cc)
	slot := ledger.Slot(f.q)
	m, err := cc.MasterForKey(ctx, f.l.StateKey(f.q, jobs.Pending))
	if err != nil {
		t.Fatal(err)
	}
	home, away := m.Options().Addr, cl.Nodes[0].Addr
	if away == home {
		away = cl.Nodes[1].Addr
	}
	run := func(op string) lease.Token {
		t.Helper()
		c := f.claimOne(f.enqueue(jobs.OperationID(op)))
		f.complete(c, ledger.Outcome{To: jobs.Succeeded})
		return c.Token
	}
	first := run("before")
	moveSlot(t, cl, cc, slot, home, away)
	between := run("away")
	if epoch.Of(uint64(between)) <= epoch.Of(uint64(first)) {
		t.Fatalf("the other master's tenure in epoch %d, not above %d", epoch.Of(uint64(between)), epoch.Of(uint64(first)))
	}
	moveSlot(t, cl, cc, slot, away, home)
	if back := run("back"); epoch.Of(uint64(back)) <= epoch.Of(uint64(between)) {
		t.Fatalf("back home: token %d in epoch %d, below the tenure between's %d (epoch %d)",
			back, epoch.Of(uint64(back)), between, epoch.Of(uint64(between)))
	}
	if rws, err := f.l.Rewinds(ctx, f.q); err != nil || len(rws) != 0 {
		t.Fatalf("a reshard lost nothing, yet rewinds %+v (%v)", rws, err)
	}
}
