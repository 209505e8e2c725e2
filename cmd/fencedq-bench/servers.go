package main

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/redisserver"
)

// installHint names what to install when redis-server is missing.
const installHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; " +
	"macOS: brew install redis) or pass --redis host:port (and --cluster-addrs for the cluster section)"

// children tracks every process the benchmark started (redis-server nodes
// and worker processes), so that one cleanup call ends them all, also after
// SIGINT.
type children struct {
	mu      sync.Mutex
	procs   map[*exec.Cmd]chan struct{} // closed when the process was reaped
	servers []*redisserver.Server
}

func newChildren() *children { return &children{procs: map[*exec.Cmd]chan struct{}{}} }

// start starts cmd in its own process group (so a terminal's SIGINT reaches
// only the benchmark, which then cleans up) and reaps it in the background.
// The returned channel is closed when the process has exited.
func (c *children) start(cmd *exec.Cmd) (<-chan struct{}, error) {
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.procs[cmd] = done
	c.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		c.mu.Lock()
		delete(c.procs, cmd)
		c.mu.Unlock()
		close(done)
	}()
	return done, nil
}

// cleanup kills every live child with SIGKILL, waits for them (at most 5s)
// and removes the temporary directories.
func (c *children) cleanup() {
	c.mu.Lock()
	waits := make([]chan struct{}, 0, len(c.procs))
	for cmd, done := range c.procs {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		waits = append(waits, done)
	}
	servers := c.servers
	c.servers = nil
	c.mu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	deadline := time.After(5 * time.Second)
	for _, w := range waits {
		select {
		case <-w:
		case <-deadline:
		}
	}
}

// startRedis launches redis-server without persistence on a free loopback
// port (cluster-enabled if asked); cleanup stops it.
func (c *children) startRedis(ctx context.Context, cluster bool) (*redisserver.Server, error) {
	s, err := redisserver.Start(ctx, redisserver.Options{Cluster: cluster})
	if err != nil {
		if _, perr := redisserver.Path(); perr != nil {
			return nil, errors.New(installHint)
		}
		return nil, err
	}
	c.mu.Lock()
	c.servers = append(c.servers, s)
	c.mu.Unlock()
	return s, nil
}

// startCluster starts three cluster-enabled servers and joins them into a
// Redis Cluster. It returns the masters' addresses.
func (c *children) startCluster(ctx context.Context) ([]string, error) {
	var nodes []*redisserver.Server
	var addrs []string
	for range 3 {
		s, err := c.startRedis(ctx, true)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	return addrs, redisserver.FormCluster(ctx, nodes)
}
