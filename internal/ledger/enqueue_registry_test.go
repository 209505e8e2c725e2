package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// registryJob is a plain job for queue q with operation id op.
func registryJob(q, op string) *ledger.NewJob {
	return &ledger.NewJob{ID: q + "-" + op, Kind: "k", Queue: q, OperationID: op, Payload: []byte(`{}`), MaxRetries: 1}
}

// wantRegistered fails the test unless every queue of qs is in the queue
// registry.
func wantRegistered(t *testing.T, l *ledger.Ledger, qs ...string) {
	t.Helper()
	got, err := l.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if !slices.Contains(got, q) {
			t.Errorf("queue %s missing from the registry %v", q, got)
		}
	}
}

// An enqueue whose wait for replicas fails wrote its jobs (unacknowledged)
// on a queue's first job: the queue must be registered anyway, since the
// call made again finds the queue no longer new. Each insert path: one
// call (merged), one call per queue (several queues), the unique script.
func TestUnacknowledgedEnqueueRegistersItsQueue(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client() // no replica
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t),
		Durability: durable.Options{Replicas: 1, Timeout: 20 * time.Millisecond}})
	unique := registryJob("unique", "u1")
	unique.Unique = &ledger.Unique{Digest: "d1", States: []ledger.State{ledger.Pending, ledger.Running}}
	for _, c := range []struct {
		name string
		js   []*ledger.NewJob
	}{
		{"one queue", []*ledger.NewJob{registryJob("solo", "s1")}},
		{"several queues", []*ledger.NewJob{registryJob("many-a", "a1"), registryJob("many-b", "b1"), registryJob("many-a", "a2")}},
		{"unique", []*ledger.NewJob{unique}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var qs []string
			for _, j := range c.js {
				if !slices.Contains(qs, j.Queue) {
					qs = append(qs, j.Queue)
				}
			}
			// the first call writes (unacknowledged) and finds its queues
			// new; the second finds them not new
			for try := range 2 {
				_, err := l.Insert(ctx, c.js)
				if !errors.Is(err, ledger.ErrEnqueueUnknown) || !errors.Is(err, durable.ErrUnacknowledged) {
					t.Fatalf("try %d: want ErrEnqueueUnknown and ErrUnacknowledged, got %v", try, err)
				}
				wantRegistered(t, l, qs...)
			}
			for _, j := range c.js {
				r, err := l.FindByOperation(ctx, j.OperationID)
				if err != nil {
					t.Fatalf("find operation %s: %v", j.OperationID, err)
				}
				if r.Queue != j.Queue {
					t.Fatalf("operation %s found in %s, want %s", j.OperationID, r.Queue, j.Queue)
				}
			}
		})
	}
}

// An enqueue whose reply is lost (the server stalled past the caller's
// deadline) may have written its jobs: its queue is registered by the
// ledger's next Insert, whichever queue that writes to.
func TestLostEnqueueReplyRegistersItsQueue(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	// the caller's deadline ends its wait for the stalled server
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	if _, err := l.Insert(ctx, []*ledger.NewJob{registryJob("other", "o1")}); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := l.Insert(short, []*ledger.NewJob{registryJob("stalled", "s1")})
	cancel()
	srv.Resume()
	if !errors.Is(err, ledger.ErrEnqueueUnknown) {
		t.Fatalf("want ErrEnqueueUnknown, got %v", err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{registryJob("other", "o2")}); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, l, "stalled", "other")
}
