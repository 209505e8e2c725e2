package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fencedq/fencedq/internal/redisserver"
)

// redisInstallHint names what to install when redis-server is missing.
const redisInstallHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; " +
	"macOS: brew install redis); the chaos suite starts, kills and restarts its own server"

// redisServer is the run's redis-server (internal/redisserver) on a free
// loopback port, with its data directory inside the run directory and AOF
// on (appendfsync always), so a restart on the same port and directory
// keeps every acknowledged write.
type redisServer struct {
	*redisserver.Server
}

// startRedis launches redis-server with AOF in dir.
func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	if _, err := redisserver.Path(); err != nil {
		return nil, errors.New(redisInstallHint)
	}
	s, err := redisserver.Start(ctx, redisserver.Options{Dir: dir, AOF: true})
	if err != nil {
		return nil, err
	}
	return &redisServer{s}, nil
}

// restart stops the server with sig (SIGKILL: a crash; SIGTERM: a clean
// shutdown), leaves it down for down, then starts it again on the same port
// and directory; the AOF brings every acknowledged write back.
func (s *redisServer) restart(ctx context.Context, sig syscall.Signal, down time.Duration) error {
	if sig == syscall.SIGTERM {
		s.terminate()
	}
	s.Kill()
	sleepCtx(ctx, down)
	if err := s.Restart(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("restart redis-server: %w", err)
	}
	return nil
}

// terminate asks the server to shut down (SIGTERM) and waits up to 5s until
// it stops answering; Kill ends whatever is left.
func (s *redisServer) terminate() {
	pid := s.Pid()
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if redisserver.Ping(s.Addr) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startCluster launches n cluster-enabled redis-servers with AOF, each in
// its own directory under dir, and forms a Redis Cluster of n masters.
func startCluster(ctx context.Context, dir string, n int) ([]*redisServer, error) {
	if _, err := redisserver.Path(); err != nil {
		return nil, errors.New(redisInstallHint)
	}
	var nodes []*redisServer
	var procs []*redisserver.Server
	stop := func() {
		for _, s := range nodes {
			s.Stop()
		}
	}
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			stop()
			return nil, err
		}
		s, err := redisserver.Start(ctx, redisserver.Options{Dir: d, AOF: true, Cluster: true})
		if err != nil {
			stop()
			return nil, err
		}
		nodes = append(nodes, &redisServer{s})
		procs = append(procs, s)
	}
	if err := redisserver.FormCluster(ctx, procs); err != nil {
		stop()
		return nil, err
	}
	return nodes, nil
}
