package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redisserver"
)

// The failover deployment (--failover): two data nodes (redis-server, AOF
// with appendfsync always, the clock shim preloaded when clock faults are
// on) and one Sentinel (quorum 1, down-after 2s, failover-timeout 5s), each
// a child process on a free loopback port, as internal/redistest's
// StartFailover builds it for the tests. One node is the primary and the
// other its replica; every client (the driver's and the workers') is a
// redis.NewFailoverClient that asks the Sentinel where the primary is, so
// it follows every promotion.
//
// The nemesis fails the primary over three ways (failoverRedis.failover):
// with the replica in sync, with the replica cut off from the primary a few
// seconds before the kill (every write the primary acknowledged since is
// lost), and cut off with its clock shifted by --clock-offset (the promoted
// node's Redis TIME is wrong from then on). After the promotion the killed
// node restarts as a replica of the new primary and resynchronises, so the
// next failover can promote it.

// masterName is the name the run's Sentinel monitors the primary under.
const masterName = "chaos"

// sentinelDownAfter is the Sentinel's down-after-milliseconds. It is above
// the Sentinel's one-second ping period on purpose: right after a
// promotion the Sentinel may take up to a ping period to reconnect to the
// new primary, and with a down-after of one second it then sometimes
// judges the new primary down and fails over again at once.
const sentinelDownAfter = 2 * time.Second

// Failover fault kinds and the names --failover-faults takes for them.
const (
	faultFailover        = "failover_healthy"
	faultFailoverLagging = "failover_lagging"
	faultFailoverClock   = "failover_clock_shifted"
)

// failoverKinds maps --failover-faults names to fault kinds.
var failoverKinds = map[string]string{
	"healthy": faultFailover,
	"lagging": faultFailoverLagging,
	"clock":   faultFailoverClock,
}

// failoverRecord is one failover the nemesis caused, with its wall-clock
// times (the checker compares them with PostgreSQL's timestamps, taken on
// the same machine).
type failoverRecord struct {
	Kind string `json:"kind"`
	// Cut is when replication was cut (lagging and clock kinds).
	Cut time.Time `json:"cut,omitzero"`
	// Killed is when the primary was SIGKILLed.
	Killed time.Time `json:"killed"`
	// Promoted is when the Sentinel named the new primary and it answered
	// as a master.
	Promoted time.Time `json:"promoted"`
	// Rejoined is when the killed node was back as an in-sync replica the
	// Sentinel would promote.
	Rejoined time.Time `json:"rejoined,omitzero"`
	// Failover is Promoted - Killed.
	Failover string `json:"failover"`
	// ClockOffset is the promoted node's clock offset, and ClockSkew how
	// far its Redis TIME was from this machine's clock once promoted.
	ClockOffset string `json:"clock_offset"`
	ClockSkew   string `json:"clock_skew,omitempty"`
	From        string `json:"from"`
	To          string `json:"to"`
}

// lossFrom is the earliest moment whose acknowledged writes this failover
// may have lost: one second before the cut (what was on its way to the
// replica when its link was killed), or for a healthy replica before the
// kill (asynchronous replication lags by far less on loopback).
func (r failoverRecord) lossFrom() time.Time {
	if !r.Cut.IsZero() {
		return r.Cut.Add(-time.Second)
	}
	return r.Killed.Add(-time.Second)
}

// failoverRedis is the run's failover deployment.
type failoverRedis struct {
	nodes    [2]*redisserver.Server
	sentinel *redisserver.Server
	// clock says whether the nodes run with the clock shim.
	clock bool
}

// startFailoverRedis starts the deployment in dir; clock preloads the clock
// shim (compiled with cc into dir) into both data nodes.
func startFailoverRedis(ctx context.Context, dir string, clock bool) (f *failoverRedis, err error) {
	if _, err := redisserver.Path(); err != nil {
		return nil, errors.New(redisInstallHint)
	}
	f = &failoverRedis{clock: clock}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	shim := ""
	if clock {
		if shim, err = redisserver.BuildClockShim(dir); err != nil {
			return nil, err
		}
	}
	for i := range f.nodes {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		o := redisserver.Options{Dir: d, AOF: true, ClockShim: shim}
		if i > 0 {
			o.ReplicaOf = f.nodes[0].Addr
		}
		if f.nodes[i], err = redisserver.Start(ctx, o); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := redisserver.SyncReplicas(sctx, f.nodes[0].Addr, 1); err != nil {
		return nil, err
	}
	d := filepath.Join(dir, "sentinel")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	f.sentinel, err = redisserver.Start(ctx, redisserver.Options{Dir: d, Sentinel: &redisserver.SentinelOptions{
		MasterName: masterName, MasterAddr: f.nodes[0].Addr, DownAfter: sentinelDownAfter, FailoverTimeout: 5 * time.Second,
	}})
	if err != nil {
		return nil, err
	}
	if err := redisserver.WaitSentinelReady(sctx, f.sentinel.Addr, masterName, f.nodes[1].Addr); err != nil {
		return nil, err
	}
	return f, nil
}

// clientOptions are the options of every client of the run.
func (f *failoverRedis) clientOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: masterName, SentinelAddrs: []string{f.sentinel.Addr}}
}

// describe names the deployment for the progress log.
func (f *failoverRedis) describe() string {
	return fmt.Sprintf("redis-server %s (primary) and %s (replica), AOF with appendfsync always, Sentinel %s (master %q)",
		f.nodes[0].Addr, f.nodes[1].Addr, f.sentinel.Addr, masterName)
}

// Stop stops every process of the deployment.
func (f *failoverRedis) Stop() {
	for _, s := range append(f.nodes[:], f.sentinel) {
		if s != nil {
			s.Stop()
		}
	}
}

// roles asks the Sentinel which node is the primary; the other is the
// replica.
func (f *failoverRedis) roles(ctx context.Context) (primary, replica *redisserver.Server, err error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: f.sentinel.Addr})
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(ctx, masterName).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("ask sentinel %s for the primary: %w", f.sentinel.Addr, err)
	}
	if len(a) != 2 {
		return nil, nil, fmt.Errorf("sentinel %s answered %v for the primary", f.sentinel.Addr, a)
	}
	addr := net.JoinHostPort(a[0], a[1])
	for i, n := range f.nodes {
		if n.Addr == addr {
			return n, f.nodes[1-i], nil
		}
	}
	return nil, nil, fmt.Errorf("sentinel %s names %s, which is none of the run's nodes", f.sentinel.Addr, addr)
}

// primaryAddr returns the current primary's address, or why it is unknown.
func (f *failoverRedis) primaryAddr(ctx context.Context) string {
	p, _, err := f.roles(ctx)
	if err != nil {
		return err.Error()
	}
	return p.Addr
}

// ready waits until the replica holds every write the primary acknowledged
// and the Sentinel knows it as promotable, and returns both. It asks the
// Sentinel for the roles again at every try, so a promotion meanwhile does
// not make it wait for the wrong node.
func (f *failoverRedis) ready(ctx context.Context) (primary, replica *redisserver.Server, err error) {
	for {
		if primary, replica, err = f.roles(ctx); err == nil {
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = redisserver.SyncReplicas(tctx, primary.Addr, 1)
			if err == nil {
				err = redisserver.WaitSentinelReady(tctx, f.sentinel.Addr, masterName, replica.Addr)
			}
			cancel()
			if err == nil {
				return primary, replica, nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		}
	}
}

// watchSwitches records every primary switch the Sentinel announces
// (+switch-master) until ctx ends, so that a promotion the nemesis did not
// make (a Sentinel that judged a new primary down) is known to the
// checker.
func (f *failoverRedis) watchSwitches(ctx context.Context, out func(time.Time, string)) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: f.sentinel.Addr})
	defer sc.Close()
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	for {
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		out(time.Now(), msg.Payload)
	}
}

// failoverPlan says how one failover is made.
type failoverPlan struct {
	kind string
	// cut is how long replication is cut before the kill (0: not cut).
	cut time.Duration
	// offset is the promoted node's clock offset.
	offset time.Duration
}

// failover fails the primary over as plan says: it waits until the
// deployment is healthy (the replica in sync and promotable), cuts
// replication and shifts the replica's clock if asked, SIGKILLs the
// primary, waits for the Sentinel's promotion, restores the promoted node's
// replication settings, then restarts the killed node (with a true clock)
// as a replica of the new primary and waits until it is in sync and
// promotable again.
func (f *failoverRedis) failover(ctx context.Context, p failoverPlan) (failoverRecord, error) {
	rec := failoverRecord{Kind: p.kind, ClockOffset: p.offset.String()}
	// Bounded waits: a deployment that does not heal fails the fault, not
	// the run (the checker still runs).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	primary, replica, err := f.ready(wctx)
	if err != nil {
		return rec, fmt.Errorf("deployment not ready for a failover: %w", err)
	}
	rec.From, rec.To = primary.Addr, replica.Addr
	if p.cut > 0 {
		if err := replica.CutReplication(wctx); err != nil {
			return rec, err
		}
		rec.Cut = time.Now()
	}
	if p.offset != 0 {
		// The replica's clock steps back now, while it is cut off.
		if err := replica.SetClockOffset(p.offset); err != nil {
			return rec, err
		}
	}
	sleepCtx(wctx, p.cut) // not cut short: the primary must die while cut off
	primary.Kill()
	rec.Killed = time.Now()
	to, err := redisserver.WaitPromotion(wctx, f.sentinel.Addr, masterName, primary.Addr)
	if err != nil {
		// No promotion: the killed node comes back as the primary it
		// still is (its AOF keeps what it acknowledged), so the run goes on.
		if p.cut > 0 {
			_ = replica.HealReplication(context.WithoutCancel(ctx))
		}
		if p.offset != 0 {
			// The replica's link is down meanwhile (it reconnects when
			// the primary is back); the next failover waits until it is
			// up again, so the Sentinel judges it by a link down time
			// measured with a true clock.
			_ = replica.SetClockOffset(0)
		}
		primary.SetReplicaOf("")
		if rerr := primary.Restart(context.WithoutCancel(ctx)); rerr != nil {
			err = fmt.Errorf("%w; restarting the old primary failed too: %v", err, rerr)
		}
		return rec, err
	}
	rec.Promoted = time.Now()
	rec.Failover = rec.Promoted.Sub(rec.Killed).Round(time.Millisecond).String()
	if to != replica.Addr {
		return rec, fmt.Errorf("sentinel promoted %s, not the replica %s", to, replica.Addr)
	}
	if skew, err := clockSkew(wctx, replica.Addr); err == nil {
		rec.ClockSkew = skew.Round(10 * time.Millisecond).String()
	}
	if p.cut > 0 {
		// The cut is a replication setting of the node; as a primary it no
		// longer matters, but the node must replicate again when it is
		// demoted later.
		if err := replica.HealReplication(wctx); err != nil {
			return rec, err
		}
	}
	primary.SetReplicaOf(replica.Addr)
	if f.clock {
		// The killed node comes back with a true clock (set while it is
		// down, so no running process sees its clock step forward): a
		// replica whose clock steps forward by minutes reports its link to
		// the primary down for as long, and the Sentinel will not promote
		// it. Only the node a clock failover promotes runs shifted.
		if err := primary.SetClockOffset(0); err != nil {
			return rec, err
		}
	}
	if err := primary.Restart(wctx); err != nil {
		return rec, fmt.Errorf("restart the old primary as a replica: %w", err)
	}
	if _, _, err := f.ready(wctx); err != nil {
		return rec, fmt.Errorf("old primary did not rejoin: %w", err)
	}
	rec.Rejoined = time.Now()
	return rec, nil
}

// restartReplica stops the replica with sig (SIGKILL: a crash; SIGTERM: a
// clean shutdown), leaves it down for down, and starts it again on the same
// port and directory, replicating from the primary. A primary that crashes
// is what the failover faults are for: restarting it in place would race
// with the Sentinel's promotion.
func (f *failoverRedis) restartReplica(ctx context.Context, sig syscall.Signal, down time.Duration) (string, error) {
	primary, replica, err := f.roles(ctx)
	if err != nil {
		return "replica", err
	}
	rs := &redisServer{replica}
	if sig == syscall.SIGTERM {
		rs.terminate()
	}
	replica.Kill()
	sleepCtx(ctx, down)
	replica.SetReplicaOf(primary.Addr)
	if err := replica.Restart(context.WithoutCancel(ctx)); err != nil {
		return replica.Addr, fmt.Errorf("restart the replica: %w", err)
	}
	return replica.Addr, nil
}

// clockSkew returns how far the Redis TIME of the server at addr is from
// this machine's clock (negative: behind), to a round trip.
func clockSkew(ctx context.Context, addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	sent := time.Now()
	t, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.Sub(sent.Add(time.Since(sent) / 2)), nil
}
