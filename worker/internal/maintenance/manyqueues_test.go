package maintenance

import (
	"fmt"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// Every maintenance pass over a thousand idle queues costs a few round
// trips, not a few per queue: each reads every queue in one pipeline and
// writes only where a read shows work, the writes of many queues sent
// together. This holds for a new leader's first passes too (the status
// pass records the queues' history, the expirer records its token on
// every queue).
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
	var rt redistest.RoundTrips
	f.rdb.AddHook(&rt)
	for _, p := range []struct {
		name string
		run  func() error
		max  int64
	}{
		{"status (first: records the history)", func() error { return l.status.runOnce(f.ctx, leader) }, 12},
		{"status", func() error { return l.status.runOnce(f.ctx, leader) }, 8},
		{"resolver", func() error { return l.resolver.runOnce(f.ctx, leader) }, 4},
		{"handover", func() error { return l.handover.runOnce(f.ctx, leader) }, 2},
		{"expirer (first: records the leader's token)", func() error { return l.expirer.runOnce(f.ctx, leader) }, 6},
		{"expirer", func() error { return l.expirer.runOnce(f.ctx, leader) }, 4},
		{"pruner", func() error { return l.pruner.runOnce(f.ctx, leader) }, 4},
	} {
		rt.Reset()
		if err := p.run(); err != nil {
			t.Fatal(err)
		}
		if n := rt.N(); n > p.max {
			t.Errorf("a %s pass over %d idle queues took %d round trips, want at most %d", p.name, len(qs), n, p.max)
		}
	}
	card, err := f.rdb.ZCard(f.ctx, f.ledger.Namespace()+":{q0999}:series").Result()
	if err != nil || card != 1 {
		t.Fatalf("the last queue's history holds %d buckets (%v), want 1", card, err)
	}
}
