// Package redistest starts real redis-server processes for tests.
//
// Every test package in fencedq gets its Redis from here. A [Server] is a
// redis-server child process on a free loopback port with its own temporary
// data directory; tests can pause (SIGSTOP), resume (SIGCONT), kill (SIGKILL)
// and restart it on the same port and directory, and shift its wall clock
// ([Server.SetClockOffset], through an LD_PRELOAD shim compiled at test
// time). [StartCluster] forms a three-master Redis Cluster, [StartClusterWith]
// any number of masters, each optionally with a replica it can fail over to
// (coordinated, or after a SIGKILL of the master). [StartFailover]
// starts a primary, a replica and a Sentinel, and can cut the replica off
// (so it lags), kill the primary and wait for the Sentinel to promote the
// replica. [New] returns a client and a fresh key
// namespace, honouring REDIS_ADDR to use an existing server instead of
// starting one; on a shared server nothing outside the namespace is touched.
package redistest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redisserver"
)

// InstallHint tells a reader how to get redis-server onto the machine.
const InstallHint = redisserver.InstallHint

// Options configures a server started by [Start].
type Options struct {
	// AOF turns on append-only-file persistence (appendfsync always), so a
	// restart keeps every acknowledged write.
	AOF bool
	// ClusterEnabled starts the server in cluster mode (used by StartCluster).
	ClusterEnabled bool
	// ClockShim runs the server with the clock shim preloaded, so
	// [Server.SetClockOffset] can shift its wall clock (see [ClockShim]).
	ClockShim bool
	// NoFunctions starts the server without FCALL and FUNCTION, as a
	// Redis before 7 answers.
	NoFunctions bool
}

// Server is a redis-server child process owned by a test.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string

	tb  testing.TB
	srv *redisserver.Server
}

// Start launches a redis-server on a free loopback port and stops it when
// the test ends. Keyspace notifications are on (see [Await]). It fails the
// test, naming what to install, when redis-server is missing.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	shim := ""
	if opts.ClockShim {
		shim = ClockShim(tb)
	}
	return startWith(tb, redisserver.Options{AOF: opts.AOF, Cluster: opts.ClusterEnabled, ClockShim: shim, NoFunctions: opts.NoFunctions})
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := redisserver.FreePort()
	if err != nil {
		tb.Fatalf("redistest: find free port: %v", err)
	}
	return p
}

// Pause stops the server process with SIGSTOP; clients block until Resume.
func (s *Server) Pause() {
	s.tb.Helper()
	if err := s.srv.Pause(); err != nil {
		s.tb.Fatalf("redistest: pause %s: %v", s.Addr, err)
	}
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.tb.Helper()
	if err := s.srv.Resume(); err != nil {
		s.tb.Fatalf("redistest: resume %s: %v", s.Addr, err)
	}
}

// Kill ends the server with SIGKILL and waits until it has exited.
func (s *Server) Kill() { s.srv.Kill() }

// Restart kills the server and starts it again on the same port and data
// directory. Without AOF all keys are gone afterwards; with AOF every
// acknowledged write survives.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.srv.Restart(context.Background()); err != nil {
		s.tb.Fatal(err)
	}
}

// Client returns a go-redis client for the server, closed at test end.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
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

// DeleteNamespace removes every key containing ns, scanning in batches (on
// every master of a cluster).
func DeleteNamespace(ctx context.Context, c redis.UniversalClient, ns string) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			deleteMatching(ctx, m, ns)
			return nil
		})
		return
	}
	deleteMatching(ctx, c, ns)
}

func deleteMatching(ctx context.Context, c redis.UniversalClient, ns string) {
	iter := c.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
	}
	for _, k := range batch { // one key per call: keys of different slots
		c.Unlink(ctx, k)
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

// ExampleLeavesNoKeys runs example, a runnable example that reads the Redis
// address from REDIS_ADDR (often a developer's own server), against a
// private server, and fails t when it left any key there.
func ExampleLeavesNoKeys(t *testing.T, example func()) {
	t.Helper()
	srv := Start(t, Options{})
	t.Setenv("REDIS_ADDR", srv.Addr)
	example()
	n, err := CountKeys(t.Context(), srv.Client())
	if err != nil || n != 0 {
		t.Fatalf("the example left %d key(s) (%v)", n, err)
	}
}
