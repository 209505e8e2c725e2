package maintenance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// commands is a go-redis hook that counts the commands a client sends,
// those of a pipeline each.
type commands struct{ n atomic.Int64 }

func (*commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestStatusPassReadsOnlyChangedQueues: a status pass over idle queues
// reads one change mark per queue, not their counts, and a queue that
// changed in any way (an enqueue, a claim, a cancel, a pruned index) has
// its gauges right after the next pass.
func TestStatusPassReadsOnlyChangedQueues(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	qs := make([]string, 50)
	for i := range qs {
		qs[i] = fmt.Sprintf("q%02d", i)
	}
	if err := f.ledger.RegisterQueues(f.ctx, qs...); err != nil {
		t.Fatal(err)
	}
	cancelled := f.enqueue("work", jobs.Queue("q03"))
	if _, err := f.client.Cancel(f.ctx, "q03", cancelled, "ops", ""); err != nil {
		t.Fatal(err)
	}
	pending := f.enqueue("work", jobs.Queue("q04"))
	pass := func() {
		t.Helper()
		if err := l.status.runOnce(f.ctx, leader); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		all, err := f.ledger.Queues(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range all {
			counts, err := f.ledger.Counts(f.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range ledger.States {
				if v := testutil.ToFloat64(f.metrics.Jobs.WithLabelValues(q, string(st))); v != float64(counts[st]) {
					t.Errorf("%s: fencedq_jobs{queue=%q,state=%q} = %v, want %d", when, q, st, v, counts[st])
				}
			}
		}
	}
	pass() // the first pass of the minute reads every queue
	check("first pass")

	var cmds commands
	f.rdb.AddHook(&cmds)
	pass()
	if n, limit := cmds.n.Load(), int64(len(qs))+20; n > limit {
		t.Errorf("an idle status pass over %d queues sent %d commands, want at most %d", len(qs), n, limit)
	}
	check("idle pass")

	f.enqueue("work", jobs.Queue("q01"))
	f.enqueue("work", jobs.Queue("q02"))
	f.claim("q02", time.Hour)
	if _, err := f.client.Cancel(f.ctx, "q04", pending, "ops", ""); err != nil {
		t.Fatal(err)
	}
	pass()
	check("after an enqueue, a claim and a cancel")

	l.pruner.now = f.later(jobs.DefaultRetention + time.Minute)
	if err := l.pruner.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n, err := f.rdb.ZCard(f.ctx, f.ledger.StateKey("q03", ledger.Cancelled)).Result(); err != nil || n != 0 {
		t.Fatalf("q03's cancelled index holds %d entries (%v) after the prune, want 0", n, err)
	}
	pass()
	check("after a prune")
}
