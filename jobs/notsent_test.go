package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// enqueueNotSent enqueues through c every way a caller can (one job, by
// operation id, unique, raw, a batch over two queues); each must fail
// with ErrNotSent, and none match ErrEnqueueUnknown: nothing left the
// client.
func enqueueNotSent(t *testing.T, c *jobs.Client) {
	t.Helper()
	ctx := context.Background()
	check := func(what string, err error) { t.Helper(); wantNotSent(t, what, err) }
	_, err := c.Enqueue(ctx, countArgs{N: 1})
	check("enqueue", err)
	_, err = c.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("not-sent-op"))
	check("enqueue with an operation id", err)
	_, err = c.Enqueue(ctx, countArgs{N: 3}, jobs.Unique(jobs.UniqueOpts{ByArgs: true}))
	check("unique enqueue", err)
	_, err = c.EnqueueRaw(ctx, "count", []byte(`{"n":4}`), jobs.Unchecked())
	check("raw enqueue", err)
	_, err = c.EnqueueRaw(ctx, "count", []byte(`{"n":5}`))
	check("raw enqueue reading the kinds' rules", err)
	_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: countArgs{N: 6}}, {Args: countArgs{N: 7}, Options: []jobs.Option{jobs.Queue("other")}}})
	check("enqueue many", err)
}

func wantNotSent(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, jobs.ErrNotSent) || errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("%s with Redis down: %v; want ErrNotSent (nothing sent), not an unknown outcome", what, err)
	}
}

// An enqueue that never reached Redis (its dial refused) fails with
// ErrNotSent, not ErrEnqueueUnknown: it is certain nothing was written,
// so a caller without an operation id may enqueue again without risking a
// second job. That holds whether the client never reached Redis (the
// partition registry's read fails first) or reached it before (its
// partition counts cached, the enqueue script's own dial refused), in
// durable mode too, and enqueueing again once Redis is back creates each
// job once.
func TestEnqueueNeverSentIsNotUnknown(t *testing.T) {
	ctx := context.Background()
	ns := redistest.Namespace(t)
	dial := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("never reached", func(t *testing.T) {
		// A server that is gone: nothing listens on its port.
		srv := redistest.Start(t, redistest.Options{})
		down := dial(srv.Addr)
		srv.Kill()
		enqueueNotSent(t, jobs.NewClient(down, jobs.Config{Namespace: ns}))
		enqueueNotSent(t, jobs.NewClient(down, jobs.Config{Namespace: ns, Durability: jobs.Durability{Replicas: 1}}))
	})

	t.Run("reached before", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		rdb := dial(srv.Addr)
		c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
		// Caches both queues' partition counts, and a pool's rules for
		// the raw enqueue are not read with Unchecked.
		if _, err := c.EnqueueMany(ctx, []jobs.Params{{Args: countArgs{N: 0}}, {Args: countArgs{N: 0}, Options: []jobs.Option{jobs.Queue("other")}}}); err != nil {
			t.Fatal(err)
		}
		srv.Kill()
		check := func(what string, err error) { t.Helper(); wantNotSent(t, what, err) }
		_, err := c.Enqueue(ctx, countArgs{N: 1})
		check("enqueue", err)
		_, err = c.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("not-sent-op"))
		check("enqueue with an operation id", err)
		_, err = c.EnqueueRaw(ctx, "count", []byte(`{"n":3}`), jobs.Unchecked())
		check("raw enqueue", err)
		_, err = c.EnqueueMany(ctx, []jobs.Params{{Args: countArgs{N: 4}}, {Args: countArgs{N: 5}, Options: []jobs.Option{jobs.Queue("other")}}})
		check("enqueue many", err)

		srv.Restart() // empty: no persistence
		if _, err := c.Enqueue(ctx, countArgs{N: 1}); err != nil {
			t.Fatal(err)
		}
		if r, err := c.Enqueue(ctx, countArgs{N: 2}, jobs.OperationID("not-sent-op")); err != nil || r.Deduplicated {
			t.Fatalf("the operation never sent, enqueued once Redis is back: %+v, %v; want created", r, err)
		}
		if n := pendingIn(t, c.Inspector(), jobs.DefaultQueue); n != 2 {
			t.Fatalf("%d jobs pending after two enqueues once Redis was back, want 2", n)
		}
	})
}
