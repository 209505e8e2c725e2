package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// ClusterOptions configures [StartClusterWith].
type ClusterOptions struct {
	// Masters is the number of masters (default 3), each holding one
	// contiguous range of about 16384/Masters slots, in order.
	Masters int
	// Replicas gives every master one replica, so a master can fail over
	// ([Cluster.Failover], [Cluster.KillMaster]).
	Replicas bool
	// ClockShim runs every node with the clock shim preloaded, so
	// [Server.SetClockOffset] can shift its wall clock.
	ClockShim bool
}

// Cluster is a Redis Cluster on loopback: masters and, when started with
// replicas, one replica per master.
type Cluster struct {
	// Nodes are the masters, in slot order: Nodes[i] serves the i-th range.
	Nodes []*Server
	// Replicas[i] replicates Nodes[i] (nil without replicas). A failover
	// swaps Nodes[i] and Replicas[i].
	Replicas []*Server
	tb       testing.TB
}

// StartCluster starts three cluster-enabled servers, splits the 16384 hash
// slots between them and waits until the cluster reports ok.
func StartCluster(tb testing.TB) *Cluster { return StartClusterN(tb, 3) }

// StartClusterN is StartCluster with n masters, each holding one
// contiguous range of about 16384/n slots, in order.
func StartClusterN(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, ClusterOptions{Masters: n})
}

// StartClusterWith starts a cluster as opts say and returns once every
// node reports cluster_state:ok and knows every other node as what it is
// (every master with its slots, every replica as its master's), and every
// replica holds everything its master acknowledged.
func StartClusterWith(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	if opts.Masters <= 0 {
		opts.Masters = 3
	}
	shim := ""
	if opts.ClockShim {
		shim = ClockShim(tb)
	}
	c := &Cluster{tb: tb}
	procs := make([]*redisserver.Server, 0, opts.Masters)
	for range opts.Masters {
		n := startWith(tb, redisserver.Options{Cluster: true, ClockShim: shim})
		c.Nodes = append(c.Nodes, n)
		procs = append(procs, n.srv)
	}
	if err := redisserver.FormCluster(context.Background(), procs); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if opts.Replicas {
		for _, m := range c.Nodes {
			r := startWith(tb, redisserver.Options{Cluster: true, ClockShim: shim})
			if err := redisserver.AddClusterReplica(ctx, m.srv, r.srv); err != nil {
				tb.Fatal(err)
			}
			c.Replicas = append(c.Replicas, r)
		}
	}
	c.settle(ctx)
	return c
}

// all returns the addresses of every node, masters first.
func (c *Cluster) all() []string {
	a := c.Addrs()
	for _, r := range c.Replicas {
		a = append(a, r.Addr)
	}
	return a
}

// topology returns what every running node is (see
// redisserver.WaitTopology): a master ("") or the replica of a master's
// address. A node KillMaster killed, not yet back (Rejoin), is left out.
func (c *Cluster) topology() map[string]string {
	want := map[string]string{}
	for i, n := range c.Nodes {
		if n.srv.Pid() != 0 {
			want[n.Addr] = ""
		}
		if i < len(c.Replicas) && c.Replicas[i].srv.Pid() != 0 {
			want[c.Replicas[i].Addr] = n.Addr
		}
	}
	return want
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// Client returns a cluster client, closed at test end.
func (c *Cluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.all()})
	c.tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// replica returns Replicas[i], failing the test without one.
func (c *Cluster) replica(i int) *Server {
	c.tb.Helper()
	if i < 0 || i >= len(c.Replicas) || c.Replicas[i] == nil {
		c.tb.Fatalf("redistest: master %d has no replica (ClusterOptions.Replicas)", i)
	}
	return c.Replicas[i]
}

// Sync waits until Replicas[i] holds every write Nodes[i] acknowledged so far.
func (c *Cluster) Sync(i int) {
	c.tb.Helper()
	c.replica(i)
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if err := redisserver.SyncReplicas(ctx, c.Nodes[i].Addr, 1); err != nil {
		c.tb.Fatal(err)
	}
}

// CutReplication cuts Replicas[i] off its master: every write the master
// acknowledges from now on is missing on it, which stays promotable by
// KillMaster (a forced failover skips the replica's data-age check).
func (c *Cluster) CutReplication(i int) {
	c.tb.Helper()
	if err := c.replica(i).srv.CutReplication(context.Background()); err != nil {
		c.tb.Fatal(err)
	}
}

// Failover promotes Replicas[i] with a coordinated CLUSTER FAILOVER (it
// catches up with its live master first: nothing is lost) and waits until
// every node knows it as the master of the slots and the former master as
// its replica, which holds everything it acknowledged; then Nodes[i] is the
// promoted node and Replicas[i] the former master.
func (c *Cluster) Failover(i int) {
	c.tb.Helper()
	r := c.replica(i)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testsignal.Timeout())
	defer cancel()
	if err := redisserver.CoordinatedFailover(ctx, r.Addr, testsignal.Scale(6*time.Second)); err != nil {
		c.tb.Fatal(err)
	}
	c.Nodes[i], c.Replicas[i] = r, c.Nodes[i]
	c.settle(ctx)
	if err := redisserver.WaitReplica(ctx, c.Replicas[i].Addr, r.Addr); err != nil {
		c.tb.Fatal(err)
	}
}

// KillMaster kills Nodes[i] with SIGKILL and promotes Replicas[i] without
// it: CLUSTER FAILOVER FORCE (an election among the other masters) at
// once rather than waiting node-timeout for the automatic failover, and
// TAKEOVER when the election does not promote it within a few seconds.
// It returns once every live node knows the promoted node as the master of
// the slots (and the rest of the cluster as before); then Nodes[i] is the
// promoted node and Replicas[i] the dead one (see Rejoin). Writes the
// replica had not received are lost.
func (c *Cluster) KillMaster(i int) {
	c.tb.Helper()
	r := c.replica(i)
	dead := c.Nodes[i]
	dead.Kill()
	// promotion (FORCE, then TAKEOVER), healing and every node's routing
	// each wait up to Timeout: one budget for all three
	ctx, cancel := context.WithTimeout(context.Background(), 3*testsignal.Timeout())
	defer cancel()
	if err := redisserver.PromoteReplica(ctx, r.Addr, testsignal.Scale(5*time.Second), testsignal.Timeout()); err != nil {
		c.tb.Fatal(err)
	}
	// Undo a CutReplication: the promoted node replicates again when it
	// is failed back from.
	if err := r.srv.HealReplication(ctx); err != nil {
		c.tb.Fatal(err)
	}
	c.Nodes[i], c.Replicas[i] = r, dead
	c.settle(ctx)
}

// settle waits until every running node reports cluster_state:ok and
// sees every other running node as c says: the masters in Nodes serving
// their slots, each replica in Replicas replicating its master, none of
// them failing or in handshake. That, on every node, is what the next
// failover needs (masters vote only for a replica they know as the failing
// master's; a master joins a coordinated failover only of a replica it
// knows as its own) and what routes every client, whichever node it asks,
// to the master of each slot.
func (c *Cluster) settle(ctx context.Context) {
	c.tb.Helper()
	if err := redisserver.WaitTopology(ctx, c.topology()); err != nil {
		c.tb.Fatal(err)
	}
}

// Rejoin restarts the master KillMaster killed (Replicas[i]), empty, and
// waits until it is a replica of the promoted node holding everything that
// node acknowledged, and every node knows it as such: master i can fail
// over again. Its cluster config survives the restart, and the cluster
// tells it its slots have moved, so it never serves them again.
func (c *Cluster) Rejoin(i int) {
	c.tb.Helper()
	r := c.replica(i)
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if err := r.srv.Restart(ctx); err != nil {
		c.tb.Fatal(err)
	}
	if err := redisserver.WaitReplica(ctx, r.Addr, c.Nodes[i].Addr); err != nil {
		c.tb.Fatal(err)
	}
	c.settle(ctx)
}

// Degradable lets every master serve its slots while another master is
// down (cluster-require-full-coverage no) and returns a client that gives
// up on a dead node at once (one dial, no retry, 300 ms reads, scaled by
// testsignal.ScaleEnv on a slow machine), closed at test end, with
// master(key): the address of the master holding key.
func (c *Cluster) Degradable() (rdb *redis.ClusterClient, master func(key string) string) {
	c.tb.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes {
		if err := n.Client().ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			c.tb.Fatal(err)
		}
	}
	rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: testsignal.Scale(300 * time.Millisecond), MaxRetries: -1, DialerRetries: 1})
	c.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb, func(key string) string {
		c.tb.Helper()
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			c.tb.Fatal(err)
		}
		return m.Options().Addr
	}
}
