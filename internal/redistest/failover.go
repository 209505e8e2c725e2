package redistest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// MasterName is the name a [Failover]'s Sentinel monitors its primary under.
const MasterName = "fq"

// FailoverOptions configures [StartFailover].
type FailoverOptions struct {
	// ClockShim runs the primary and the replica with the clock shim
	// preloaded, so [Server.SetClockOffset] can shift their wall clocks
	// (compiled with cc at test time; the test fails naming the package to
	// install when cc is missing).
	ClockShim bool
}

// Failover is a Redis deployment that can fail over: a primary, one replica
// and one Sentinel (quorum 1, down-after 1s, failover-timeout 5s), each a
// child process on a free loopback port, stopped when the test ends.
type Failover struct {
	// Primary is the server the Sentinel named primary at start.
	Primary *Server
	// Replica replicates Primary; after KillPrimary it is the primary.
	Replica *Server
	// Sentinel monitors them.
	Sentinel *Server

	tb testing.TB
}

// StartFailover starts a primary, a replica of it and a Sentinel, and
// returns once the replica is in sync and the Sentinel knows it as
// promotable.
func StartFailover(tb testing.TB, opts FailoverOptions) *Failover {
	tb.Helper()
	shim := ""
	if opts.ClockShim {
		shim = ClockShim(tb)
	}
	f := &Failover{tb: tb}
	f.Primary = startWith(tb, redisserver.Options{ClockShim: shim})
	f.Replica = startWith(tb, redisserver.Options{ClockShim: shim, ReplicaOf: f.Primary.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	f.Sync()
	f.Sentinel = startWith(tb, redisserver.Options{Sentinel: &redisserver.SentinelOptions{
		MasterName: MasterName, MasterAddr: f.Primary.Addr,
		DownAfter: time.Second, FailoverTimeout: 5 * time.Second,
	}})
	if err := redisserver.WaitSentinelReady(ctx, f.Sentinel.Addr, MasterName, f.Replica.Addr); err != nil {
		tb.Fatal(err)
	}
	return f
}

// startWith starts a server with opts in a test directory, stopped at test end.
func startWith(tb testing.TB, opts redisserver.Options) *Server {
	tb.Helper()
	opts.Dir = tb.TempDir()
	if opts.Sentinel == nil {
		opts.NotifyKeyspaceEvents = KeyspaceEvents
	}
	srv, err := redisserver.Start(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return &Server{Addr: srv.Addr, tb: tb, srv: srv}
}

// ClockShim compiles the clock shim into a test directory and returns its
// path (see redisserver.BuildClockShim). It fails the test, naming the
// package to install, when cc is missing.
func ClockShim(tb testing.TB) string {
	tb.Helper()
	lib, err := redisserver.BuildClockShim(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return lib
}

// ClientOptions returns options for redis.NewFailoverClient that find the
// primary through the Sentinel.
func (f *Failover) ClientOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: []string{f.Sentinel.Addr}}
}

// Client returns a failover client (redis.NewFailoverClient), closed at
// test end: it follows the Sentinel to whichever server is primary.
func (f *Failover) Client() *redis.Client {
	c := redis.NewFailoverClient(f.ClientOptions())
	f.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Sync waits until the replica holds every write the primary acknowledged
// so far (WAIT on a replicated marker write).
func (f *Failover) Sync() {
	f.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if err := redisserver.SyncReplicas(ctx, f.Primary.Addr, 1); err != nil {
		f.tb.Fatal(err)
	}
}

// CutReplication cuts the replica off the primary: every write the primary
// acknowledges from now on is missing on the replica, which stays
// promotable (see redisserver.Server.CutReplication). Kill the primary
// within a few seconds, before the Sentinel stops trusting the replica.
func (f *Failover) CutReplication() {
	f.tb.Helper()
	if err := f.Replica.srv.CutReplication(context.Background()); err != nil {
		f.tb.Fatal(err)
	}
}

// HealReplication undoes CutReplication: the replica reconnects and
// resynchronises (call Sync to wait until it holds everything).
func (f *Failover) HealReplication() {
	f.tb.Helper()
	if err := f.Replica.srv.HealReplication(context.Background()); err != nil {
		f.tb.Fatal(err)
	}
}

// KillPrimary kills the primary with SIGKILL and waits until the Sentinel
// has promoted the replica; Replica is then the primary.
func (f *Failover) KillPrimary() {
	f.tb.Helper()
	f.Primary.Kill()
	// Sentinel aborts a failover when the replica's last INFO is stale
	// (it asks every 10 s until the primary is down) and tries again only
	// after twice the failover-timeout (10 s); a Sentinel whose timer was
	// held up 2 s (a loaded machine) enters TILT mode and acts on nothing
	// for 30 s. The wait covers a TILT and two tries.
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Scale(75*time.Second))
	defer cancel()
	addr, err := redisserver.WaitPromotion(ctx, f.Sentinel.Addr, MasterName, f.Primary.Addr)
	if err != nil {
		f.tb.Fatal(err)
	}
	if addr != f.Replica.Addr {
		f.tb.Fatalf("redistest: sentinel promoted %s, not the replica %s", addr, f.Replica.Addr)
	}
}

// SetClockOffset shifts the server's wall clock (Redis TIME included) by d
// from now on; negative is behind. The server must run with the clock shim
// (FailoverOptions.ClockShim).
func (s *Server) SetClockOffset(d time.Duration) {
	s.tb.Helper()
	if err := s.srv.SetClockOffset(d); err != nil {
		s.tb.Fatalf("redistest: set clock offset of %s: %v", s.Addr, err)
	}
}

// Rejoin restarts the primary KillPrimary killed, empty, as a replica of the
// promoted one (Replica), and waits until it holds every write the new
// primary acknowledged so far: the deployment has a replica again.
func (f *Failover) Rejoin() {
	f.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if err := f.Primary.srv.Restart(ctx); err != nil {
		f.tb.Fatal(err)
	}
	host, port, err := net.SplitHostPort(f.Replica.Addr)
	if err != nil {
		f.tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: f.Primary.Addr})
	defer c.Close()
	if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
		f.tb.Fatal(err)
	}
	if err := redisserver.SyncReplicas(ctx, f.Replica.Addr, 1); err != nil {
		f.tb.Fatal(err)
	}
}

// FailBackReady is Rejoin, then swaps the roles: Primary is the promoted
// node, Replica the rejoined one, once the Sentinel knows it as promotable,
// so KillPrimary fails back to it. The Sentinel waits twice its failover
// timeout (10 s) after a failover before it starts another one for the
// same primary name.
func (f *Failover) FailBackReady() {
	f.tb.Helper()
	f.Rejoin()
	f.Primary, f.Replica = f.Replica, f.Primary
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	if err := redisserver.WaitSentinelReady(ctx, f.Sentinel.Addr, MasterName, f.Replica.Addr); err != nil {
		f.tb.Fatal(err)
	}
}
