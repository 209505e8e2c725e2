package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions configures a Sentinel started with Options.Sentinel.
type SentinelOptions struct {
	// MasterName is the name the Sentinel monitors the primary under
	// (clients pass it to redis.NewFailoverClient).
	MasterName string
	// MasterAddr is the primary's host:port.
	MasterAddr string
	// Quorum is how many Sentinels must agree the primary is down (default 1).
	Quorum int
	// DownAfter is how long the primary must not answer before it counts as
	// down (default 1s). A replica whose link to the primary has been down
	// for longer than ten times this (plus the time the primary has been
	// down) is not promoted.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout (default 5s): the bound
	// of one failover, and half the wait before another on the same primary.
	FailoverTimeout time.Duration
}

// sentinelConf is the path of the Sentinel's configuration file, which the
// Sentinel rewrites with what it learns (replicas, epochs).
func (s *Server) sentinelConf() string {
	return filepath.Join(s.Dir, "sentinel-"+strconv.Itoa(s.Port)+".conf")
}

// writeSentinelConf writes the configuration file unless it exists: a
// restarted Sentinel keeps what it learnt.
func (s *Server) writeSentinelConf() error {
	if _, err := os.Stat(s.sentinelConf()); err == nil {
		return nil
	}
	o := *s.opts.Sentinel
	if o.Quorum <= 0 {
		o.Quorum = 1
	}
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	host, port, err := net.SplitHostPort(o.MasterAddr)
	if err != nil {
		return fmt.Errorf("redisserver: sentinel master address: %w", err)
	}
	conf := strings.Join([]string{
		"port " + strconv.Itoa(s.Port),
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		"dir " + s.Dir,
		"logfile " + s.logFile(),
		fmt.Sprintf("sentinel monitor %s %s %s %d", o.MasterName, host, port, o.Quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", o.MasterName, o.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", o.MasterName, o.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", o.MasterName),
	}, "\n") + "\n"
	return os.WriteFile(s.sentinelConf(), []byte(conf), 0o644)
}

// tuneSentinel makes the Sentinel at addr read its servers' INFO every
// second instead of every 10 s (SENTINEL DEBUG, Redis 7.0 and later; an
// older Sentinel keeps its period): a rejoined replica's role is then known
// within a second, so a test waiting for it (WaitSentinelReady) does not
// depend on where a 10 s period fell on a loaded machine.
func tuneSentinel(ctx context.Context, addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	_ = c.Do(ctx, "SENTINEL", "DEBUG", "info-period", "1000").Err()
}

// cutUser is the replication user a cut replica authenticates with: it
// does not exist on the primary, so every reconnection fails.
const cutUser = "fencedq-cut"

// CutReplication cuts a replica off its primary: the replica drops its
// link and every reconnection fails authentication (it is given a
// replication user the primary does not know), so writes the primary
// acknowledges from now on never reach it. The replica stays a replica
// and keeps answering, so a Sentinel can still promote it (if the cut has
// not lasted longer than SentinelOptions.DownAfter allows).
func (s *Server) CutReplication(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.ConfigSet(ctx, "masteruser", cutUser).Err(); err != nil {
		return fmt.Errorf("redisserver: cut replication on %s: %w", s.Addr, err)
	}
	if err := c.ConfigSet(ctx, "masterauth", cutUser).Err(); err != nil {
		return fmt.Errorf("redisserver: cut replication on %s: %w", s.Addr, err)
	}
	if err := c.ClientKillByFilter(ctx, "TYPE", "master").Err(); err != nil {
		return fmt.Errorf("redisserver: cut replication on %s: %w", s.Addr, err)
	}
	return nil
}

// HealReplication undoes CutReplication: the replica reconnects and
// resynchronises at its next attempt (within a second).
func (s *Server) HealReplication(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.ConfigSet(ctx, "masterauth", "").Err(); err != nil {
		return fmt.Errorf("redisserver: heal replication on %s: %w", s.Addr, err)
	}
	if err := c.ConfigSet(ctx, "masteruser", "").Err(); err != nil {
		return fmt.Errorf("redisserver: heal replication on %s: %w", s.Addr, err)
	}
	return nil
}

// SyncReplicas waits until n replicas of the primary at addr hold every
// write it has acknowledged so far: it publishes on a private channel (a
// write that is replicated but touches no key) and sends WAIT on the same
// connection, which returns once n replicas acknowledged it, and with it
// everything before. ctx bounds the wait.
func SyncReplicas(ctx context.Context, addr string, n int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	bound := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		bound = time.Until(d)
	}
	if err := c.Publish(ctx, "fencedq:redisserver:sync", "1").Err(); err != nil {
		return fmt.Errorf("redisserver: sync replicas of %s: %w", addr, err)
	}
	got, err := c.Wait(ctx, n, bound).Result()
	if err != nil {
		return fmt.Errorf("redisserver: sync replicas of %s: %w", addr, err)
	}
	if got < int64(n) {
		return fmt.Errorf("redisserver: sync replicas of %s: %d of %d acknowledged within %v", addr, got, n, bound)
	}
	return nil
}

// WaitSentinelReady waits until the Sentinel at sentinelAddr knows the
// replica at replicaAddr of master name as a healthy, promotable replica:
// listed with flags "slave" only, its link to the primary up, its role
// confirmed by its own INFO. Sentinel publishes no event for that, so this
// polls SENTINEL REPLICAS (every 50ms) until ctx ends.
func WaitSentinelReady(ctx context.Context, sentinelAddr, name, replicaAddr string) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr})
	defer sc.Close()
	last := "no answer"
	for {
		reps, err := sc.Replicas(ctx, name).Result()
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("replicas %v", reps)
			for _, r := range reps {
				if net.JoinHostPort(r["ip"], r["port"]) == replicaAddr && r["flags"] == "slave" &&
					r["master-link-status"] == "ok" && r["role-reported"] == "slave" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: sentinel %s does not know replica %s as ready: %s: %w",
				sentinelAddr, replicaAddr, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrNoPromotion means the Sentinel did not switch to a new primary in time.
var ErrNoPromotion = errors.New("redisserver: no new primary")

// WaitPromotion waits until the Sentinel at sentinelAddr names a primary
// for master name other than old, and returns its address once that server
// reports the master role. It subscribes to the Sentinel's +switch-master
// events first, then asks, then waits for the event, so a switch is never
// missed; ctx bounds the wait.
func WaitPromotion(ctx context.Context, sentinelAddr, name, old string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr})
	defer sc.Close()
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is in place
		return "", fmt.Errorf("redisserver: subscribe to %s: %w", sentinelAddr, err)
	}
	addr := ""
	if a, err := sc.GetMasterAddrByName(ctx, name).Result(); err == nil && len(a) == 2 {
		addr = net.JoinHostPort(a[0], a[1])
	}
	for addr == "" || addr == old {
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil {
			state := "unknown"
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			cmd := redis.NewStringCmd(ictx, "INFO", "sentinel")
			if sc.Process(ictx, cmd) == nil {
				state = "tilt " + infoField(cmd.Val(), "sentinel_tilt")
			}
			cancel()
			return "", fmt.Errorf("%w: sentinel %s still names %s (%s): %w", ErrNoPromotion, sentinelAddr, old, state, err)
		}
		// "<name> <old ip> <old port> <new ip> <new port>"
		f := strings.Fields(msg.Payload)
		if len(f) == 5 && f[0] == name {
			addr = net.JoinHostPort(f[3], f[4])
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("redisserver: new primary %s: %w", addr, err)
	}
	if !strings.Contains(info, "role:master") {
		return "", fmt.Errorf("%w: sentinel names %s, which is not a master", ErrNoPromotion, addr)
	}
	return addr, nil
}
