package worker_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redisserver"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// A pool left on a primary that was demoted (its replica promoted, the old
// primary made its replica) has every lease renewal refused with READONLY:
// its running attempts, a plain job's and one naming a resource, are
// cancelled with a cause matching lease.ErrLost while their leases on the
// promoted node still last, not left running unfenced.
func TestRenewalsRefusedOnADemotedPrimaryCancelAttemptsInTime(t *testing.T) {
	a := redistest.Start(t, redistest.Options{})
	b := redistest.Start(t, redistest.Options{})
	ns := redistest.Namespace(t)
	e := newEnvOn(t, a.Client(), ns)
	cfg := e.config()
	cfg.LeaseTTL = 2 * time.Second
	p := e.pool(cfg)
	type ended struct {
		cause error
		at    time.Time // the namespace's time on the promoted node when it ended
		left  time.Duration
	}
	started := make(chan string, 4)
	ends := make(chan ended, 4)
	bLedger := ledger.New(b.Client(), ledger.Config{Namespace: ns})
	wait := func(ctx context.Context, q, id string) error {
		started <- id
		<-ctx.Done()
		cause := context.Cause(ctx)
		c := context.Background()
		now, err := bLedger.ReadTime(c)
		if err != nil {
			t.Error(err)
		}
		rec, err := bLedger.Get(c, q, id)
		if err != nil {
			t.Error(err)
		}
		ends <- ended{cause: cause, at: now, left: rec.Deadline.Sub(now)}
		return ctx.Err()
	}
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		return wait(ctx, j.Queue, j.ID)
	}))
	_ = worker.Register(p, jobs.WorkFunc[namedResourceArgs](func(ctx context.Context, j *jobs.Job[namedResourceArgs]) error {
		return wait(ctx, j.Queue, j.ID)
	}))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		// a takes writes again, so the pool's commits land and it stops
		if err := a.Client().ReplicaOf(context.Background(), "NO", "ONE").Err(); err != nil {
			t.Error(err)
		}
		stop()
		if err := recv(t, done, "pool stopped"); err != nil {
			t.Errorf("pool.Run: %v", err)
		}
	}()
	e.enqueue(echoArgs{N: 1})
	e.enqueue(namedResourceArgs{Name: "account:7"})
	recv(t, started, "first attempt started")
	recv(t, started, "second attempt started")

	demote(t, a, b)

	for range 2 {
		got := recv(t, ends, "attempt cancelled")
		if !errors.Is(got.cause, lease.ErrLost) {
			t.Errorf("attempt cancelled with %v, want a cause matching lease.ErrLost", got.cause)
		}
		if got.left <= 0 {
			t.Errorf("attempt cancelled %v after its lease on the promoted node ended (at %v)", -got.left, got.at)
		}
	}
}

// demote makes b a replica of a holding all of a's data, then promotes b
// and makes a its replica: a failover a client still on a does not see.
func demote(t *testing.T, a, b *redistest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsignal.Timeout())
	defer cancel()
	replicaOf(t, b.Client(), a.Addr)
	if err := redisserver.SyncReplicas(ctx, a.Addr, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Client().ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	replicaOf(t, a.Client(), b.Addr)
}

// replicaOf makes the server c is connected to a replica of addr.
func replicaOf(t *testing.T, c *redis.Client, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReplicaOf(context.Background(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
}
