package maintenance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// The status and resolver passes over a thousand idle queues cost a few
// round trips, not a few per queue: each reads every queue in one pipeline
// and the resolver reads further only where an uncertain job is due.
func TestPassesOverManyQueuesCostFewRoundTrips(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	qs := make([]string, 1000)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%04d", i)
	}
	if err := f.ledger.RegisterQueues(f.ctx, qs...); err != nil {
		t.Fatal(err)
	}
	// The first status pass also records the queues' history (once a
	// minute, per queue); the one measured is the next.
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	var rt roundTrips
	f.rdb.AddHook(&rt)
	if err := l.status.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load(); n > 8 {
		t.Fatalf("a status pass over %d idle queues took %d round trips, want at most 8", len(qs), n)
	}
	rt.n.Store(0)
	if err := l.resolver.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load(); n > 4 {
		t.Fatalf("a resolver pass over %d idle queues took %d round trips, want at most 4", len(qs), n)
	}
}
