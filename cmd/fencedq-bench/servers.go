package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// installHint names what to install when redis-server is missing.
const installHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; " +
	"macOS: brew install redis) or pass --redis host:port (and --cluster-addrs for the cluster section)"

// children tracks every process the benchmark started (redis-server nodes
// and worker processes) and the temporary directories it made, so that one
// cleanup call ends them all, also after SIGINT.
type children struct {
	mu    sync.Mutex
	procs map[*exec.Cmd]chan struct{} // closed when the process was reaped
	dirs  []string
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

// tempDir makes a temporary directory removed by cleanup.
func (c *children) tempDir(pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.dirs = append(c.dirs, d)
	c.mu.Unlock()
	return d, nil
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
	dirs := c.dirs
	c.dirs = nil
	c.mu.Unlock()
	deadline := time.After(5 * time.Second)
	for _, w := range waits {
		select {
		case <-w:
		case <-deadline:
		}
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// redisServer is a redis-server child on a loopback port.
type redisServer struct {
	Addr string
	port int
	dir  string
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRedis launches redis-server without persistence on a free loopback
// port; cluster starts it cluster-enabled.
func (c *children) startRedis(ctx context.Context, cluster bool) (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New(installHint)
	}
	dir, err := c.tempDir("fencedq-bench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port can be taken between probing and binding
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)),
		}
		if cluster {
			args = append(args, "--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
				"--cluster-node-timeout", "5000")
		}
		cmd := exec.Command(path, args...)
		exited, err := c.start(cmd)
		if err != nil {
			return nil, err
		}
		if lastErr = waitPing(ctx, s.Addr, exited); lastErr == nil {
			return s, nil
		}
		_ = cmd.Process.Kill()
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func waitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited early", addr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if ping(addr) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer within 10s", addr)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// startCluster starts three cluster-enabled servers, splits the hash slots
// between them (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER MEET) and waits
// until every node reports cluster_state:ok. It returns the masters' addresses.
func (c *children) startCluster(ctx context.Context) ([]string, error) {
	var nodes []*redisServer
	for range 3 {
		s, err := c.startRedis(ctx, true)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, s)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	per := 16384 / len(nodes)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		lo, hi := i*per, (i+1)*per-1
		if i == len(nodes)-1 {
			hi = 16383
		}
		err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err()
		if err == nil && i > 0 {
			err = cl.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].port)).Err()
		}
		_ = cl.Close()
		if err != nil {
			return nil, fmt.Errorf("form cluster on %s: %w", n.Addr, err)
		}
	}
	for _, n := range nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if ctx.Err() != nil {
				_ = cl.Close()
				return nil, fmt.Errorf("cluster did not become ok on %s: %v", n.Addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
	return addrs, nil
}
