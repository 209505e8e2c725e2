package worker_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// TestRunSaysRedisCannotBeReached: a pool whose Redis is not there says so
// in plain words, naming the address (not "jobs: partitions: dial tcp"),
// and keeps the network error for errors.Is and errors.As.
func TestRunSaysRedisCannotBeReached(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	addr := srv.Addr
	srv.Kill()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t)}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background())
	var op *net.OpError
	if err == nil || !strings.HasPrefix(err.Error(), "worker: cannot reach Redis at "+addr+" ") ||
		strings.Contains(err.Error(), "partitions") || !errors.As(err, &op) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Run: %v; want it to say Redis at %s cannot be reached, keeping the network error", err, addr)
	}
}

// TestRunRefusesAMasterNameTheSentinelsDoNotMonitor: a pool whose
// Config.Jobs.Sentinel names a master no Sentinel monitors could never
// claim (every claim's epoch lookup fails); Run says so at once, with
// ErrConfig, instead of starting and logging failed claims for ever.
func TestRunRefusesAMasterNameTheSentinelsDoNotMonitor(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	wrong := f.ClientOptions()
	wrong.MasterName = "no-such-master"
	shared := redis.NewFailoverClient(wrong) // as README's setup: one options value for both
	t.Cleanup(func() { _ = shared.Close() })
	for name, rdb := range map[string]redis.UniversalClient{"right client": f.Client(), "shared options": shared} {
		p, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: redistest.Namespace(t), Sentinel: wrong}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = p.Run(ctx)
		if !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), `master named "no-such-master"`) || ctx.Err() != nil {
			t.Errorf("%s: Run with a master name the Sentinels do not monitor: %v; want ErrConfig naming it, at once", name, err)
		}
		cancel()
	}
}

// TestRunRefusesARedisServerGivenAsASentinel: a Sentinel address that a
// plain Redis server answers (a data node's port given for a Sentinel's)
// is a configuration error, not an outage: Run fails at once with
// ErrConfig (and lease.ErrNotSentinel) naming the address, alone or beside
// a real Sentinel, and starts nothing.
func TestRunRefusesARedisServerGivenAsASentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	plain := f.Primary.Addr
	for name, addrs := range map[string][]string{
		"only a Redis server":    {plain},
		"beside a real Sentinel": {f.Sentinel.Addr, plain},
	} {
		fo := &redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: addrs}
		ns := redistest.Namespace(t)
		p, err := worker.NewPool(f.Client(), worker.Config{Jobs: jobs.Config{Namespace: ns, Sentinel: fo}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = p.Run(ctx)
		if !errors.Is(err, worker.ErrConfig) || !errors.Is(err, lease.ErrNotSentinel) || !strings.Contains(err.Error(), plain) || ctx.Err() != nil {
			t.Errorf("%s: Run with a Redis server as a Sentinel: %v; want ErrConfig and ErrNotSentinel naming %s, at once", name, err, plain)
		}
		cancel()
		if keys, err := f.Client().Keys(context.Background(), ns+":*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("%s: keys %v, %v after a refused start, want none", name, keys, err)
		}
	}
}
