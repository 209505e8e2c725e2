package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// masterOf returns the index in c.Nodes of the master serving key.
func masterOf(t *testing.T, cc *redis.ClusterClient, c *redistest.Cluster, key string) int {
	t.Helper()
	m, err := cc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if n.Addr == m.Options().Addr {
			return i
		}
	}
	t.Fatalf("%s is served by %s, not a master of the cluster", key, m.Options().Addr)
	return -1
}

// acquireOnCluster acquires right after a failover: the first calls may
// still reach the dead master until the client has reloaded its slot map.
func acquireOnCluster(t *testing.T, m *lease.Manager, resource, owner string) *lease.Lease {
	t.Helper()
	deadline := time.Now().Add(testsignal.Timeout())
	for {
		l, err := m.Acquire(context.Background(), resource, owner, time.Minute)
		if err == nil {
			return l
		}
		if errors.Is(err, lease.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("no acquire after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// On Redis Cluster a lease acquired on a master after its replica was cut
// off is lost with it (the zombie). The replica, whose clock is 10 minutes
// behind, is promoted after a SIGKILL of the master (or by a coordinated
// failover, losing nothing): the next acquire succeeds at once with a
// token above the zombie's, so storage takes the live holder's writes and
// refuses the zombie's; a lease that survived the failover ends when its
// TTL says, not 10 minutes later.
func TestClusterFailoverTokensOutrankTheZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	for _, kill := range []bool{true, false} {
		name := "coordinated"
		if kill {
			name = "sigkill"
		}
		t.Run(name, func(t *testing.T) { testClusterFailover(t, kill) })
	}
}

func testClusterFailover(t *testing.T, kill bool) {
	ctx := context.Background()
	c := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: true, ClockShim: true})
	cc := c.Client()
	ns := redistest.Namespace(t)
	m := lease.NewManager(cc, lease.Config{Namespace: ns})
	store := newStore(t, ns)
	const res = "account:1"
	i := masterOf(t, cc, c, m.Key(res))
	short := ""
	for n := 0; short == ""; n++ { // a second resource on the same master
		if r := fmt.Sprintf("account:short-%d", n); masterOf(t, cc, c, m.Key(r)) == i {
			short = r
		}
	}
	c.Replicas[i].SetClockOffset(-10 * time.Minute)

	l1, err := m.Acquire(ctx, res, "first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, store, l1, "op1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	held, err := m.Acquire(ctx, short, "held", ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.Sync(i)
	var zombie *lease.Lease
	if kill {
		c.CutReplication(i)
		if zombie, err = m.Acquire(ctx, res, "zombie", time.Minute); err != nil {
			t.Fatal(err)
		}
		c.KillMaster(i) // the zombie's acquire is lost
	} else {
		if zombie, err = m.Acquire(ctx, res, "zombie", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx, zombie); err != nil { // its process thinks it still holds it
			t.Fatal(err)
		}
		c.Failover(i)
	}
	if zombie.Token <= l1.Token {
		t.Fatalf("zombie %d not above t1 %d", zombie.Token, l1.Token)
	}

	live := acquireOnCluster(t, m, res, "live")
	if live.Token <= zombie.Token {
		t.Fatalf("fencing inverted: the live holder's token %d is not above the zombie's %d", live.Token, zombie.Token)
	}
	// The clock alone would get it wrong: the promoted node's time in µs
	// (the clock-only token) is below the zombie's token.
	now, err := c.Nodes[i].Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(now.UnixMicro()) >= uint64(zombie.Token) {
		t.Fatalf("the promoted clock (%d µs) already passed the zombie's token %d: the test shows nothing", now.UnixMicro(), zombie.Token)
	}
	if err := write(ctx, store, zombie, "op2"); err != nil {
		t.Fatalf("zombie's first write: %v", err)
	}
	if err := write(ctx, store, live, "op3"); err != nil {
		t.Fatalf("live holder refused after the failover: %v", err)
	}
	if err := write(ctx, store, zombie, "op4"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("zombie after the live holder: want fence.ErrStale, got %v", err)
	}

	// The lease that survived ends by its TTL on the namespace's time, not
	// 10 minutes later by the promoted node's clock.
	waitUntil := time.Now().Add(ttl + testsignal.Timeout())
	for {
		h, err := m.Holder(ctx, short)
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			break
		}
		if h.Token != held.Token {
			t.Fatalf("holder %+v, want the lease from before the failover", h)
		}
		if time.Now().After(waitUntil) {
			t.Fatalf("the %v lease from before the failover is still held %v later (deadline %v)", ttl, ttl+testsignal.Timeout(), h.Deadline)
		}
		time.Sleep(100 * time.Millisecond)
	}
	next := acquireOnCluster(t, m, short, "next")
	if next.Token <= held.Token {
		t.Fatalf("after the failover %d is not above %d", next.Token, held.Token)
	}
}
