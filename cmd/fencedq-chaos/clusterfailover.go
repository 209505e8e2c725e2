package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fencedq/fencedq/internal/redisserver"
)

// The Cluster failover deployment (--cluster N --failover): the N AOF
// masters of --cluster, each with one replica (AOF too), formed as
// internal/redistest's StartClusterWith does it and failed over with the
// same internal/redisserver mechanics as its Failover and KillMaster:
//
//   - cluster_master_killed: SIGKILL of a master, then its replica's
//     promotion by CLUSTER FAILOVER FORCE (TAKEOVER when the election does
//     not promote it in time). Writes the replica had not received are
//     lost (asynchronous replication), unless --durable made every
//     acknowledgement wait for the replica;
//   - cluster_master_killed_lagging: the same, with the replica cut off
//     from its master 3-5 s before the kill (redisserver's CutReplication):
//     what the master acknowledged meanwhile is lost without --durable,
//     and with it those acknowledgements never came;
//   - cluster_failover_coordinated: a coordinated CLUSTER FAILOVER, where
//     the replica catches up with its live master first.
//
// Either way the run waits until every live node routes the slots to the
// promoted node; a killed master then restarts (its AOF and cluster config
// kept), learns its slots moved and resynchronises as the replica of the
// promoted node, so master i can fail over again. Redis restarts restart a
// replica in this mode (a crashed master is what the kills are).

// Cluster failover fault kinds and the names --failover-faults takes for
// them with --cluster.
const (
	faultClusterKill        = "cluster_master_killed"
	faultClusterKillLagging = "cluster_master_killed_lagging"
	faultClusterCoordinated = "cluster_failover_coordinated"
)

// clusterFailoverKinds maps --failover-faults names to fault kinds on Cluster.
var clusterFailoverKinds = map[string]string{
	"kill":        faultClusterKill,
	"lagging":     faultClusterKillLagging,
	"coordinated": faultClusterCoordinated,
}

// clusterPromoteWait bounds each wait for a promotion: a forced failover's
// election, then TAKEOVER's; a coordinated failover's attempt.
const clusterPromoteWait = 10 * time.Second

// clusterRedis is the run's Cluster with one replica per master.
type clusterRedis struct {
	mu sync.Mutex
	// masters[i] serves the i-th slot range and replicas[i] replicates
	// it; a failover swaps them.
	masters, replicas []*redisServer
}

// startClusterRedis starts n masters as startCluster does and gives each
// one replica, returning once every replica holds everything its master
// acknowledged and every node reports cluster_state:ok.
func startClusterRedis(ctx context.Context, dir string, n int) (c *clusterRedis, err error) {
	masters, err := startCluster(ctx, dir, n)
	if err != nil {
		return nil, err
	}
	c = &clusterRedis{masters: masters}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i, m := range masters {
		d := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return c, err
		}
		r, err := redisserver.Start(ctx, redisserver.Options{Dir: d, AOF: true, Cluster: true})
		if err != nil {
			return c, err
		}
		c.replicas = append(c.replicas, &redisServer{r})
		if err := redisserver.AddClusterReplica(sctx, m.Server, r); err != nil {
			return c, err
		}
	}
	if err := redisserver.WaitClusterOK(sctx, c.addrs(nil), 2*n); err != nil {
		return c, err
	}
	return c, nil
}

// addrs returns every node's address but skip's, masters first.
func (c *clusterRedis) addrs(skip *redisServer) []string {
	var a []string
	for _, s := range append(append([]*redisServer{}, c.masters...), c.replicas...) {
		if s != skip {
			a = append(a, s.Addr)
		}
	}
	return a
}

// seeds returns every node's address, for the clients' seed list.
func (c *clusterRedis) seeds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs(nil)
}

// Stop stops every node.
func (c *clusterRedis) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range append(append([]*redisServer{}, c.masters...), c.replicas...) {
		s.Stop()
	}
}

// failover fails master i over as kind says (a lagging kill cuts the
// replica off cut before it) and returns what happened; a record with a
// zero Killed means nothing was attempted.
func (c *clusterRedis) failover(ctx context.Context, kind string, i int, cut time.Duration) (failoverRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, r := c.masters[i], c.replicas[i]
	rec := failoverRecord{Kind: kind, From: m.Addr, To: r.Addr, ClockOffset: "0s"}
	// A node restarted or rejoined a moment ago may still be syncing.
	if err := redisserver.WaitReplica(ctx, r.Addr, m.Addr); err != nil {
		return rec, fmt.Errorf("replica %s not in sync before the failover: %w", r.Addr, err)
	}
	killed := kind != faultClusterCoordinated
	if kind == faultClusterKillLagging {
		rec.Cut = time.Now()
		if err := r.CutReplication(ctx); err != nil {
			return rec, err
		}
		sleepCtx(ctx, cut)
	}
	var err error
	rec.Killed = time.Now()
	if killed {
		m.Kill()
		err = redisserver.PromoteReplica(ctx, r.Addr, clusterPromoteWait, clusterPromoteWait)
		if herr := r.HealReplication(ctx); err == nil && kind == faultClusterKillLagging {
			err = herr
		}
	} else {
		err = redisserver.CoordinatedFailover(ctx, r.Addr, clusterPromoteWait)
	}
	if err != nil {
		return rec, err
	}
	c.masters[i], c.replicas[i] = r, m
	skip := (*redisServer)(nil)
	if killed {
		skip = m
	}
	if err := redisserver.WaitSlotOwner(ctx, c.addrs(skip), r.Addr); err != nil {
		return rec, err
	}
	rec.Promoted = time.Now()
	rec.Failover = rec.Promoted.Sub(rec.Killed).Round(time.Millisecond).String()
	if killed {
		if err := m.Restart(context.WithoutCancel(ctx)); err != nil {
			return rec, fmt.Errorf("restart killed master %s: %w", m.Addr, err)
		}
	}
	if err := redisserver.WaitReplica(ctx, m.Addr, r.Addr); err != nil {
		return rec, err
	}
	rec.Rejoined = time.Now()
	return rec, nil
}

// waitOK waits until every node reports cluster_state:ok: the checker
// reads once the cluster has healed from the last fault (a node can report
// CLUSTERDOWN for a moment after a failover or a restart).
func (c *clusterRedis) waitOK(ctx context.Context) error {
	c.mu.Lock()
	addrs, n := c.addrs(nil), len(c.masters)
	c.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return redisserver.WaitClusterOK(wctx, addrs, 2*n)
}

// restartReplica restarts replica i as redisServer.restart does and waits
// until it is back in sync with its master.
func (c *clusterRedis) restartReplica(ctx context.Context, i int, sig syscall.Signal, down time.Duration) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replicas[i]
	if err := r.restart(ctx, sig, down); err != nil {
		return r.Addr, err
	}
	return r.Addr, redisserver.WaitReplica(ctx, r.Addr, c.masters[i].Addr)
}

// clusterFailover fails a random master over as kind says and records it.
// It runs to its end even when the fault phase ends meanwhile: a cluster
// left half failed over would stop the drain.
func (n *nemesis) clusterFailover(ctx context.Context, kind string) {
	i := n.intn(n.o.Cluster)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	cut := time.Duration(0)
	if kind == faultClusterKillLagging {
		cut = n.between(3*time.Second, 5*time.Second)
	}
	rec, err := n.cf.failover(fctx, kind, i, cut)
	ev := faultEvent{Kind: kind, Target: "master " + rec.From, Duration: time.Since(t0).Round(time.Millisecond).String()}
	if !rec.Killed.IsZero() {
		n.mu.Lock()
		n.failovers = append(n.failovers, rec)
		n.mu.Unlock()
		ev.Detail = fmt.Sprintf("promoted %s after %s", rec.To, rec.Failover)
		if cut > 0 {
			ev.Detail += fmt.Sprintf(", replication cut %s before the kill", rec.Killed.Sub(rec.Cut).Round(time.Millisecond))
		}
	}
	if err != nil {
		ev.Error = err.Error()
	}
	n.record(ev)
}
