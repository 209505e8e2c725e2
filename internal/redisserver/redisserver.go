// Package redisserver runs redis-server child processes on loopback: start
// one (optionally with AOF, cluster-enabled, as a replica, or as a
// Sentinel), pause, resume, kill and restart it on the same port and data
// directory, and join them into a Redis Cluster, with replicas that CLUSTER
// FAILOVER promotes (cluster.go). For failover tests it
// cuts a replica off its primary, waits for a Sentinel to promote a
// replica, and shifts a server's wall clock through an LD_PRELOAD shim
// (see [BuildClockShim]). The test harness (internal/redistest), the
// benchmark and the chaos suite all use it.
package redisserver

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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint tells a reader how to get redis-server onto the machine.
const InstallHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) or set REDIS_ADDR=host:port to use a running server"

// ErrNotRunning means the server process is not running.
var ErrNotRunning = errors.New("redisserver: not running")

// Path returns the path of redis-server, or an error carrying InstallHint.
func Path() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(InstallHint)
	}
	return p, nil
}

// Options configures a server.
type Options struct {
	// Dir is the data directory (default: a new temporary directory,
	// removed by Stop).
	Dir string
	// AOF turns on append-only persistence with appendfsync always, so a
	// restart keeps every acknowledged write. Without it nothing is kept.
	AOF bool
	// Cluster starts the server cluster-enabled (see FormCluster).
	Cluster bool
	// NotifyKeyspaceEvents is the server's notify-keyspace-events setting
	// (empty: none), kept across restarts. Tests set it to wait on keyspace
	// notifications; it costs throughput, so benchmarks leave it empty.
	NotifyKeyspaceEvents string
	// ReplicaOf, "host:port", starts the server as a replica of that primary.
	ReplicaOf string
	// Sentinel, when set, starts a Sentinel (redis-server --sentinel)
	// monitoring one primary instead of a data server.
	Sentinel *SentinelOptions
	// NoFunctions starts the server without FCALL and FUNCTION, as a
	// server before Redis 7 (which has no function libraries) answers.
	NoFunctions bool
	// ClockShim is the path of the clock shim built by BuildClockShim. When
	// set, the process runs with it preloaded and SetClockOffset shifts its
	// wall clock.
	ClockShim string
}

// Server is a redis-server child process.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	// Port is the server's port.
	Port int
	// Dir is the data directory.
	Dir string

	opts   Options
	ownDir bool
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start launches redis-server on a free loopback port and waits until it
// answers PING.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if _, err := Path(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, Dir: opts.Dir}
	if s.Dir == "" {
		d, err := os.MkdirTemp("", "fencedq-redis-")
		if err != nil {
			return nil, err
		}
		s.Dir, s.ownDir = d, true
	}
	var err error
	for range 5 { // a free port can be taken between probing and binding
		if s.Port, err = FreePort(); err != nil {
			break
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.launch(ctx); err == nil {
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("redisserver: start: %w", err)
}

func (s *Server) args() []string {
	if s.opts.Sentinel != nil {
		return []string{s.sentinelConf(), "--sentinel"}
	}
	a := []string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", s.logFile(),
		"--repl-diskless-sync-delay", "0",
	}
	if s.opts.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if s.opts.NoFunctions {
		a = append(a, "--rename-command", "FCALL", "", "--rename-command", "FUNCTION", "")
	}
	if s.opts.NotifyKeyspaceEvents != "" {
		a = append(a, "--notify-keyspace-events", s.opts.NotifyKeyspaceEvents)
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		a = append(a, "--replicaof", host, port)
	}
	if s.opts.Cluster {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.Dir, "nodes-"+strconv.Itoa(s.Port)+".conf"),
			"--cluster-node-timeout", "2000")
	}
	return a
}

func (s *Server) launch(ctx context.Context) error {
	path, err := Path()
	if err != nil {
		return err
	}
	if s.opts.Sentinel != nil {
		if err := s.writeSentinelConf(); err != nil {
			return err
		}
	}
	cmd := exec.Command(path, s.args()...)
	if s.opts.ClockShim != "" {
		env, err := s.clockEnv()
		if err != nil {
			return err
		}
		cmd.Env = append(os.Environ(), env...)
	}
	// Its own process group: a terminal's Ctrl-C reaches only the parent,
	// which then stops its servers itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited early; log: %s", s.LogTail())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return ctx.Err()
		default:
		}
		if Ping(s.Addr) == nil {
			if s.opts.Sentinel != nil {
				tuneSentinel(ctx, s.Addr)
			}
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("redis-server on %s did not answer within 10s; log: %s", s.Addr, s.LogTail())
}

// logFile is the path of the server's log.
func (s *Server) logFile() string {
	return filepath.Join(s.Dir, "redis-"+strconv.Itoa(s.Port)+".log")
}

// LogTail returns the last lines of the server's log.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(s.logFile())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// Ping sends PING to addr and expects PONG.
func Ping(addr string) error {
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

// Pid returns the server's process id, or 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return ErrNotRunning
	}
	return cmd.Process.Signal(sig)
}

// Pause stops the process with SIGSTOP; clients block until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Kill ends the process with SIGKILL and waits until it has exited.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
}

// Restart kills the server and starts it again on the same port and data
// directory. Without AOF all keys are gone afterwards.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	var err error
	for range 50 { // the old socket may linger briefly
		if err = s.launch(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redisserver: restart %s: %w", s.Addr, err)
}

// SetReplicaOf sets what the server replicates from when it next starts
// (Restart): primary ("host:port"), or nothing (it starts as a primary)
// when empty. A node that lost its primary role in a failover rejoins as
// a replica of the new primary this way, without ever starting as a
// primary with its old data; what it holds that the new primary does not
// is discarded by the resynchronisation. Call it while the server is
// down or before Restart, not concurrently with them.
func (s *Server) SetReplicaOf(primary string) {
	s.opts.ReplicaOf = primary
}

// Stop kills the server and removes its data directory if Start made it.
func (s *Server) Stop() {
	s.Kill()
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
}

// FormCluster splits the 16384 hash slots between cluster-enabled servers,
// joins them and waits until every node reports cluster_state:ok and knows
// every other. A node whose handshake timed out (a loaded machine: Redis
// forgets a node that does not complete the handshake within the node
// timeout) is introduced again every two seconds.
func FormCluster(ctx context.Context, nodes []*Server) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer clients[i].Close()
	}
	meet := func(i int) error {
		return clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].Port)).Err()
	}
	per := 16384 / len(nodes)
	for i, n := range nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == len(nodes)-1 {
			hi = 16383
		}
		err := clients[i].ClusterAddSlotsRange(ctx, lo, hi).Err()
		if err == nil && i > 0 {
			err = meet(i)
		}
		if err != nil {
			return fmt.Errorf("redisserver: form cluster on %s: %w", n.Addr, err)
		}
	}
	known := strconv.Itoa(len(nodes))
	lastMeet := time.Now()
	for {
		ready := true
		var state string
		for i, n := range nodes {
			info, err := clients[i].ClusterInfo(ctx).Result()
			if err == nil && infoField(info, "cluster_state") == "ok" && infoField(info, "cluster_known_nodes") == known {
				continue
			}
			ready = false
			state = fmt.Sprintf("%s: state %q, known nodes %q of %s (%v)", n.Addr,
				infoField(info, "cluster_state"), infoField(info, "cluster_known_nodes"), known, err)
			if i > 0 && err == nil && infoField(info, "cluster_known_nodes") != known && time.Since(lastMeet) > 2*time.Second {
				_ = meet(i)
			}
		}
		if ready {
			return nil
		}
		if time.Since(lastMeet) > 2*time.Second {
			lastMeet = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: cluster did not become ok: %s", state)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
