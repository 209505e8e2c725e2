package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterPoll is how often the cluster helpers look at a node's state:
// Redis Cluster publishes no event for a role change or a healed state.
const clusterPoll = 50 * time.Millisecond

// pollUntil asks check every clusterPoll until it reports done, an error
// from check is only remembered (the state may still be converging), and
// ctx ends the wait with what was last seen.
func pollUntil(ctx context.Context, what string, check func(ctx context.Context) (bool, string)) error {
	last := "no answer"
	for {
		ok, seen := check(ctx)
		if ok {
			return nil
		}
		if seen != "" && ctx.Err() == nil {
			last = seen
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: %s: last seen %s: %w", what, last, ctx.Err())
		case <-time.After(clusterPoll):
		}
	}
}

// NodeID returns the cluster node id of the server at addr (CLUSTER MYID).
func NodeID(ctx context.Context, addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("redisserver: cluster myid of %s: %w", addr, err)
	}
	return id, nil
}

// Role returns what the server at addr says it is: "master" or "slave"
// (INFO replication's role), and for a replica whether its link to the
// primary is up.
func Role(ctx context.Context, addr string) (role string, linkUp bool, err error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", false, err
	}
	return infoField(info, "role"), infoField(info, "master_link_status") == "up", nil
}

// infoField returns field's value in an INFO reply, or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// AddClusterReplica joins the cluster-enabled server replica to the
// cluster master belongs to, as master's replica (CLUSTER MEET, then
// CLUSTER REPLICATE once it knows master), and waits until its link to
// master is up and master holds everything it acknowledged so far.
func AddClusterReplica(ctx context.Context, master, replica *Server) error {
	id, err := NodeID(ctx, master.Addr)
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer c.Close()
	host, port, _ := net.SplitHostPort(master.Addr)
	if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("redisserver: meet %s from %s: %w", master.Addr, replica.Addr, err)
	}
	what := "replica " + replica.Addr + " of " + master.Addr
	err = pollUntil(ctx, what+" replicating", func(ctx context.Context) (bool, string) {
		// CLUSTER REPLICATE fails until the node has heard of master.
		if err := c.Do(ctx, "CLUSTER", "REPLICATE", id).Err(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err != nil {
		return err
	}
	return WaitReplica(ctx, replica.Addr, master.Addr)
}

// WaitReplica waits until the server at addr is a replica whose link to
// its primary is up, then until primary holds everything it acknowledged
// so far (SyncReplicas with one replica).
func WaitReplica(ctx context.Context, addr, primary string) error {
	err := pollUntil(ctx, addr+" replicating "+primary, func(ctx context.Context) (bool, string) {
		role, up, err := Role(ctx, addr)
		if err != nil {
			return false, err.Error()
		}
		return role == "slave" && up, fmt.Sprintf("role %s, link up %v", role, up)
	})
	if err != nil {
		return err
	}
	return SyncReplicas(ctx, primary, 1)
}

// WaitClusterOK waits until every server in addrs reports cluster_state:ok
// and knows exactly known nodes (0: any number).
func WaitClusterOK(ctx context.Context, addrs []string, known int) error {
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		err := pollUntil(ctx, "cluster state ok on "+a, func(ctx context.Context) (bool, string) {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			ok := infoField(info, "cluster_state") == "ok"
			if known > 0 {
				ok = ok && infoField(info, "cluster_known_nodes") == fmt.Sprint(known)
			}
			return ok, "state " + infoField(info, "cluster_state") + ", known nodes " + infoField(info, "cluster_known_nodes")
		})
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// FailoverMode is how ClusterFailover promotes a replica.
type FailoverMode string

// The modes of CLUSTER FAILOVER.
const (
	// FailoverCoordinated is CLUSTER FAILOVER: the replica and its live
	// master agree, the replica catches up first, nothing is lost.
	FailoverCoordinated FailoverMode = ""
	// FailoverForce is CLUSTER FAILOVER FORCE: no handshake with the
	// master (it may be dead), an election among the masters.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover is CLUSTER FAILOVER TAKEOVER: no election either;
	// the replica raises its own config epoch and takes the slots.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// ErrNotPromoted means a replica did not become a master in time.
var ErrNotPromoted = errors.New("redisserver: replica not promoted")

// ClusterFailover promotes the cluster replica at addr with CLUSTER
// FAILOVER in mode, and waits (at most wait) until it reports the master
// role. Redis answers the command at once and runs the failover after it,
// so a mode whose election fails leaves the replica a replica: ErrNotPromoted.
func ClusterFailover(ctx context.Context, addr string, mode FailoverMode, wait time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != FailoverCoordinated {
		args = append(args, string(mode))
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redisserver: cluster failover %s on %s: %w", mode, addr, err)
	}
	return WaitMaster(ctx, addr, wait)
}

// WaitMaster waits (at most wait) until the server at addr reports the
// master role; ErrNotPromoted when it does not.
func WaitMaster(ctx context.Context, addr string, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := pollUntil(wctx, addr+" master", func(ctx context.Context) (bool, string) {
		role, _, err := Role(ctx, addr)
		if err != nil {
			return false, err.Error()
		}
		return role == "master", "role " + role
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %w", ErrNotPromoted, err)
	}
	return err
}

// WaitSlotOwner waits until every server in addrs names owner as the
// master serving the slots of a node (CLUSTER NODES: owner is flagged
// master and lists slots) and reports cluster_state:ok, so a cluster
// client that asks any of them is routed to owner.
func WaitSlotOwner(ctx context.Context, addrs []string, owner string) error {
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		err := pollUntil(ctx, a+" routing to "+owner, func(ctx context.Context) (bool, string) {
			nodes, err := c.ClusterNodes(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			for _, line := range strings.Split(nodes, "\n") {
				f := strings.Fields(line)
				// <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
				if len(f) >= 9 && strings.HasPrefix(f[1], owner+"@") && strings.Contains(f[2], "master") &&
					!strings.Contains(f[2], "fail") {
					return infoField(info, "cluster_state") == "ok", "state " + infoField(info, "cluster_state") + failingPeers(nodes)
				}
			}
			return false, owner + " not a master with slots"
		})
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitTopology waits until every node of want reports cluster_state:ok and
// sees the cluster as want says: each of want's addresses (a node's
// host:port) a master serving slots when its value is "", else a replica
// of the master at its value; none of them flagged failing, suspected,
// in handshake or without an address; each one's cluster bus link up. A
// failover needs that of every node, not one: masters vote only for a
// replica they know as a replica of the failing master, and a coordinated
// failover starts only once the master knows the replica as its own; a
// node that does not know yet counts its cluster_known_nodes all the same.
// A node outside want (a killed master) is neither asked nor looked at.
func WaitTopology(ctx context.Context, want map[string]string) error {
	addrs := make([]string, 0, len(want))
	for a := range want {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		err := pollUntil(ctx, "cluster topology seen by "+a, func(ctx context.Context) (bool, string) {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			nodes, err := c.ClusterNodes(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			if state := infoField(info, "cluster_state"); state != "ok" {
				return false, "state " + state + failingPeers(nodes)
			}
			if miss := topologyMismatch(nodes, want); miss != "" {
				return false, miss
			}
			return true, ""
		})
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// topologyMismatch returns, for a CLUSTER NODES reply, the first node of
// want the reply does not show as want says (see WaitTopology), or "".
func topologyMismatch(nodes string, want map[string]string) string {
	type node struct {
		id, flags, master, link string
		slots                   bool
	}
	seen, twice := map[string]node{}, map[string]bool{}
	for _, line := range strings.Split(nodes, "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if _, dup := seen[addr]; dup {
			twice[addr] = true
		}
		seen[addr] = node{id: f[0], flags: f[2], master: f[3], link: f[7], slots: len(f) > 8}
	}
	addrs := make([]string, 0, len(want))
	for a := range want {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		n, ok := seen[a]
		switch {
		case !ok:
			return a + " unknown"
		case twice[a]:
			return a + " listed twice (a handshake in progress)"
		case strings.Contains(n.flags, "fail") || strings.Contains(n.flags, "handshake") || strings.Contains(n.flags, "noaddr"):
			return a + " flagged " + n.flags
		case n.link != "connected":
			return a + " link " + n.link
		case want[a] == "" && (!strings.Contains(n.flags, "master") || !n.slots):
			return a + " not a master with slots: " + n.flags
		case want[a] != "":
			m, ok := seen[want[a]]
			if !strings.Contains(n.flags, "slave") || !ok || n.master != m.id {
				return a + " not a replica of " + want[a] + ": " + n.flags + " of " + n.master
			}
		}
	}
	return ""
}

// failingPeers lists, for an error message, the nodes a CLUSTER NODES
// reply flags as failing or suspected (", sees <addr> <flags>" each).
func failingPeers(nodes string) string {
	var out string
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && strings.Contains(f[2], "fail") {
			out += ", sees " + f[1] + " " + f[2]
		}
	}
	return out
}
