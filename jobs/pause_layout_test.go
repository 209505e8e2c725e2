package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// beforeFirst runs do once, before the first command (alone or in a
// pipeline) for which match holds is sent.
type beforeFirst struct {
	match func(redis.Cmder) bool
	do    func()
	once  sync.Once
}

func (b *beforeFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *beforeFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if b.match(cmd) {
			b.once.Do(b.do)
		}
		return next(ctx, cmd)
	}
}

func (b *beforeFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if b.match(cmd) {
				b.once.Do(b.do)
			}
		}
		return next(ctx, cmds)
	}
}

// mentions reports whether one of cmd's arguments contains s.
func mentions(cmd redis.Cmder, s string) bool {
	for _, a := range cmd.Args() {
		if v, ok := a.(string); ok && strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// TestPauseAndLayoutChangeRacing: a pause of a partitioned queue and a
// change of its partition count run at once, in either order of their
// reads and writes. The queue ends paused on every partition, the new
// layout's included, so jobs routed to the new partitions do not run; and
// a resume racing a change likewise leaves none paused.
func TestPauseAndLayoutChangeRacing(t *testing.T) {
	rdb, ns := redistest.New(t)
	opts := rdb.Options()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	pausedBy := func(q string, p int) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, n := range ledger.PartitionNames(q, p) {
			ps, err := l.Paused(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if ps != nil {
				out[n] = ps.ID
			}
		}
		return out
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	// raced runs the first operation on a client of its own whose hook runs
	// the second, on c, just before the first's command matching match.
	raced := func(match func(redis.Cmder) bool, first func(*jobs.Client) error, second func() error) {
		t.Helper()
		own := redis.NewClient(opts)
		t.Cleanup(func() { _ = own.Close() })
		var err2 error
		own.AddHook(&beforeFirst{match: match, do: func() { err2 = second() }})
		oc := jobs.NewClient(own, jobs.Config{Namespace: ns})
		if err := first(oc); err != nil {
			t.Fatal(err)
		}
		if err2 != nil {
			t.Fatal(err2)
		}
	}
	script := func(cmd redis.Cmder) bool { n := cmd.Name(); return n == "evalsha" || n == "eval" || n == "fcall" }
	registryWrite := func(cmd redis.Cmder) bool { return script(cmd) && mentions(cmd, ns+":partitions") }
	pauseWrite := func(cmd redis.Cmder) bool { return script(cmd) && mentions(cmd, "pause") }

	for _, q := range []string{"a", "b", "c"} {
		if _, err := c.SetPartitions(ctx, q, 3, "test", ""); err != nil {
			t.Fatal(err)
		}
	}
	// 1. The pause runs whole between the layout change's read of the
	// partitions and its registry write.
	raced(registryWrite, func(oc *jobs.Client) error {
		_, err := oc.SetPartitions(ctx, "a", 6, "ops", "peak")
		return err
	}, func() error {
		_, err := c.Pause(ctx, "a", "alice", "incident")
		return err
	})
	pa, err := c.Inspector().Paused(ctx, "a")
	if err != nil || pa == nil {
		t.Fatalf("queue a after the pause: %+v, %v", pa, err)
	}
	if got := pausedBy("a", 6); len(got) != 6 {
		t.Fatalf("queue a's new layout paused on %d of 6 partitions: %v", len(got), got)
	}

	// 2. The layout change runs whole between the pause's read of the
	// partitions and its first write.
	raced(pauseWrite, func(oc *jobs.Client) error {
		_, err := oc.Pause(ctx, "b", "alice", "incident")
		return err
	}, func() error {
		_, err := c.SetPartitions(ctx, "b", 6, "ops", "peak")
		return err
	})
	if got := pausedBy("b", 6); len(got) != 6 {
		t.Fatalf("queue b's new layout paused on %d of 6 partitions: %v", len(got), got)
	}

	// 3. A resume runs whole between a change's read and its registry
	// write: the new partitions, paused by the change, are resumed too.
	if _, err := c.Pause(ctx, "c", "alice", "incident"); err != nil {
		t.Fatal(err)
	}
	raced(registryWrite, func(oc *jobs.Client) error {
		_, err := oc.SetPartitions(ctx, "c", 6, "ops", "peak")
		return err
	}, func() error {
		_, err := c.Resume(ctx, "c", "alice", "fixed")
		return err
	})
	if got := pausedBy("c", 6); len(got) != 0 {
		t.Fatalf("queue c resumed, still paused on %v", got)
	}
}
