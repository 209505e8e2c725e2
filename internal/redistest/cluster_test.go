package redistest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// slotKey returns a key that hashes to master i's slot range of c.
func slotKey(t *testing.T, ctx context.Context, cc *redis.ClusterClient, c *redistest.Cluster, i int, tag string) string {
	t.Helper()
	for n := 0; n < 10000; n++ {
		k := fmt.Sprintf("{%s-%d}", tag, n)
		m, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == c.Nodes[i].Addr {
			return k
		}
	}
	t.Fatalf("no key of tag %s on master %d", tag, i)
	return ""
}

// get reads key through the cluster client, retrying while the client
// still routes to a node that is gone: go-redis reloads its slot map on a
// redirect or every ClusterStateReloadInterval (60 s), not on a failed
// dial, so a caller asks for the reload (fencedq's script batcher does).
func get(t *testing.T, ctx context.Context, cc *redis.ClusterClient, key string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(testsignal.Timeout())
	for {
		v, err := cc.Get(ctx, key).Result()
		if err == nil || err == redis.Nil || time.Now().After(deadline) {
			return v, err
		}
		cc.ReloadState(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

// knownAsReplicas fails the test unless every running node of c lists
// Replicas[i] as a replica of Nodes[i], neither failing nor in handshake:
// what the next failover's election needs of every voter.
func knownAsReplicas(t *testing.T, c *redistest.Cluster, when string) {
	t.Helper()
	ids := map[string]string{} // address -> node id
	for _, n := range append(append([]*redistest.Server{}, c.Nodes...), c.Replicas...) {
		id, err := redisserver.NodeID(context.Background(), n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		ids[n.Addr] = id
	}
	for _, n := range append(append([]*redistest.Server{}, c.Nodes...), c.Replicas...) {
		nodes, err := n.Client().ClusterNodes(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range c.Replicas {
			want := ids[r.Addr] + " " + r.Addr + "@"
			var line string
			for _, l := range strings.Split(nodes, "\n") {
				if strings.HasPrefix(l, want) {
					line = l
				}
			}
			f := strings.Fields(line)
			if len(f) < 4 || !strings.Contains(f[2], "slave") || strings.Contains(f[2], "fail") ||
				strings.Contains(f[2], "handshake") || f[3] != ids[c.Nodes[i].Addr] {
				t.Fatalf("%s: %s sees replica %d as %q, want a replica of %s", when, n.Addr, i, line, ids[c.Nodes[i].Addr])
			}
		}
	}
}

func role(t *testing.T, s *redistest.Server) string {
	t.Helper()
	r, _, err := redisserver.Role(context.Background(), s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A cluster with replicas fails a master over both ways: a coordinated
// CLUSTER FAILOVER keeps every write; a SIGKILL of the master after its
// replica was cut off loses what the replica missed; the killed master
// rejoins as a replica and the slot can fail over again.
func TestClusterFailover(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: true})
	if len(c.Replicas) != 3 {
		t.Fatalf("%d replicas, want 3", len(c.Replicas))
	}
	for i := range c.Nodes {
		if role(t, c.Nodes[i]) != "master" || role(t, c.Replicas[i]) != "slave" {
			t.Fatalf("node %d: roles %s/%s", i, role(t, c.Nodes[i]), role(t, c.Replicas[i]))
		}
	}
	knownAsReplicas(t, c, "once started")
	cc := c.Client()

	k0 := slotKey(t, ctx, cc, c, 0, "a")
	cc.Set(ctx, k0, "kept", 0)
	old0 := c.Nodes[0]
	c.Failover(0)
	if c.Nodes[0] == old0 || role(t, c.Nodes[0]) != "master" || role(t, c.Replicas[0]) != "slave" {
		t.Fatal("coordinated failover did not swap the roles")
	}
	knownAsReplicas(t, c, "after a coordinated failover")
	if v, err := get(t, ctx, cc, k0); err != nil || v != "kept" {
		t.Fatalf("after a coordinated failover: %q, %v", v, err)
	}

	k1 := slotKey(t, ctx, cc, c, 1, "b")
	cc.Set(ctx, k1, "replicated", 0)
	c.Sync(1)
	c.CutReplication(1)
	lost := slotKey(t, ctx, cc, c, 1, "c")
	if err := cc.Set(ctx, lost, "acknowledged", 0).Err(); err != nil {
		t.Fatal(err)
	}
	promoted := c.Replicas[1]
	c.KillMaster(1)
	if c.Nodes[1] != promoted || role(t, promoted) != "master" {
		t.Fatal("KillMaster did not promote the replica")
	}
	if v, err := get(t, ctx, cc, k1); err != nil || v != "replicated" {
		t.Fatalf("a replicated write after the kill: %q, %v", v, err)
	}
	if v, err := get(t, ctx, cc, lost); err != redis.Nil {
		t.Fatalf("a write the cut-off replica never had survived: %q, %v", v, err)
	}
	c.Rejoin(1)
	if role(t, c.Replicas[1]) != "slave" {
		t.Fatal("the killed master did not rejoin as a replica")
	}
	knownAsReplicas(t, c, "after a rejoin")
	c.Failover(1)
	if v, err := get(t, ctx, cc, k1); err != nil || v != "replicated" {
		t.Fatalf("after failing back: %q, %v", v, err)
	}
}

// StartClusterN with six masters spreads slots over all of them.
func TestClusterSixMasters(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartClusterN(t, 6)
	cc := c.Client()
	for i := range c.Nodes {
		k := slotKey(t, ctx, cc, c, i, "six")
		if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n := c.Nodes[i].Client().DBSize(ctx).Val(); n != 1 {
			t.Fatalf("master %d holds %d keys, want 1", i, n)
		}
	}
}
