// Package redistest starts real redis-server processes for tests.
//
// Every test package in fencedq gets its Redis from here. A [Server] is a
// redis-server child process on a free loopback port with its own temporary
// data directory; tests can pause (SIGSTOP), resume (SIGCONT), kill (SIGKILL)
// and restart it on the same port and directory. [StartCluster] forms a
// three-master Redis Cluster. [New] returns a client and a fresh key
// namespace, honouring REDIS_ADDR to use an existing server instead of
// starting one; on a shared server nothing outside the namespace is touched.
package redistest

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
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// InstallHint tells a reader how to get redis-server onto the machine.
const InstallHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) or set REDIS_ADDR=host:port to use a running server"

// Options configures a server started by [Start].
type Options struct {
	// AOF turns on append-only-file persistence (appendfsync always), so a
	// restart keeps every acknowledged write.
	AOF bool
	// ClusterEnabled starts the server in cluster mode (used by StartCluster).
	ClusterEnabled bool
}

// Server is a redis-server child process owned by a test.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string

	tb   testing.TB
	dir  string
	port int
	opts Options

	mu  sync.Mutex
	cmd *exec.Cmd
}

// RedisServerPath returns the path of redis-server or an error with InstallHint.
func RedisServerPath() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(InstallHint)
	}
	return p, nil
}

// Start launches a redis-server on a free loopback port and stops it when
// the test ends. It fails the test, naming what to install, when
// redis-server is missing.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if _, err := RedisServerPath(); err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb, dir: tb.TempDir(), opts: opts}
	var lastErr error
	for range 5 { // a free port can be taken between probing and binding
		s.port = FreePort(tb)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if lastErr = s.launch(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		tb.Fatalf("redistest: start redis-server: %v", lastErr)
	}
	tb.Cleanup(func() { s.stop() })
	return s
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: find free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--protected-mode", "no",
		"--repl-diskless-sync-delay", "0",
	}
	if s.opts.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if s.opts.ClusterEnabled {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000")
	}
	return a
}

func (s *Server) launch() error {
	path, err := RedisServerPath()
	if err != nil {
		return err
	}
	cmd := exec.Command(path, s.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited early (%v); log: %s", err, s.logTail())
		default:
		}
		if ping(s.Addr) == nil {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			go func() { <-exited }() // keep reaping; Wait already owns the process
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("redis-server on %s did not answer within 10s; log: %s", s.Addr, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
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

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.tb.Fatalf("redistest: server %s is not running", s.Addr)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: signal %v to %s: %v", sig, s.Addr, err)
	}
}

// Pause stops the server process with SIGSTOP; clients block until Resume.
func (s *Server) Pause() { s.tb.Helper(); s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.tb.Helper(); s.signal(syscall.SIGCONT) }

// Kill ends the server with SIGKILL and waits until its port is closed.
func (s *Server) Kill() {
	s.tb.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	for range 500 {
		if ping(s.Addr) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart kills the server and starts it again on the same port and data
// directory. Without AOF all keys are gone afterwards; with AOF every
// acknowledged write survives.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	for range 50 { // the old socket may linger briefly
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart %s: %v", s.Addr, err)
}

func (s *Server) stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
	}
}

// Client returns a go-redis client for the server, closed at test end.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Cluster is a three-master Redis Cluster on loopback.
type Cluster struct {
	// Nodes are the masters, in slot order.
	Nodes []*Server
	tb    testing.TB
}

// StartCluster starts three cluster-enabled servers, splits the 16384 hash
// slots between them and waits until the cluster reports ok.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb}
	for range 3 {
		c.Nodes = append(c.Nodes, Start(tb, Options{ClusterEnabled: true}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	per := 16384 / len(c.Nodes)
	for i, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Nodes)-1 {
			hi = 16383
		}
		if err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			tb.Fatalf("redistest: cluster addslots on %s: %v", n.Addr, err)
		}
		if i > 0 {
			if err := cl.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Nodes[0].port)).Err(); err != nil {
				tb.Fatalf("redistest: cluster meet: %v", err)
			}
		}
		_ = cl.Close()
	}
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if ctx.Err() != nil {
				tb.Fatalf("redistest: cluster did not become ok on %s: %v %q", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
	return c
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
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Namespace returns a fresh key namespace for one test, unique across runs.
func Namespace(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, tb.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return "t-" + name + "-" + uuid.NewString()[:8]
}

// New returns a client and a fresh namespace for one test. With REDIS_ADDR
// set it connects to that server and, at cleanup, deletes only the keys
// that contain the namespace (never FLUSHALL); otherwise it starts a
// private redis-server.
func New(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	ns := Namespace(tb)
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		c := redis.NewClient(&redis.Options{Addr: addr})
		if err := c.Ping(context.Background()).Err(); err != nil {
			tb.Fatalf("redistest: REDIS_ADDR=%s does not answer: %v", addr, err)
		}
		tb.Cleanup(func() {
			DeleteNamespace(context.Background(), c, ns)
			_ = c.Close()
		})
		return c, ns
	}
	return Start(tb, Options{}).Client(), ns
}

// DeleteNamespace removes every key containing ns, scanning in batches.
func DeleteNamespace(ctx context.Context, c *redis.Client, ns string) {
	iter := c.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}

// CountKeys returns the number of keys in the server's current database.
func CountKeys(ctx context.Context, c redis.UniversalClient) (int64, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var total int64
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			mu.Lock()
			total += n
			mu.Unlock()
			return err
		})
		return total, err
	}
	return c.DBSize(ctx).Result()
}
