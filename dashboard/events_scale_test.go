package dashboard_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// commandCount is a go-redis hook counting the commands sent and the list
// items they read back.
type commandCount struct{ n, items atomic.Int64 }

func (c *commandCount) N() int64     { return c.n.Load() }
func (c *commandCount) Items() int64 { return c.items.Load() }
func (c *commandCount) Reset()       { c.n.Store(0); c.items.Store(0) }

func (c *commandCount) count(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		c.n.Add(1)
		if s, ok := cmd.(*redis.StringSliceCmd); ok {
			c.items.Add(int64(len(s.Val())))
		}
	}
}

func (*commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c.count(cmd)
		return err
	}
}

func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		c.count(cmds...)
		return err
	}
}

// TestEventsAcrossManyQueuesBounded: api/events over 1 000 queues costs a
// fixed number of round trips and a bounded number of events read, and
// still shows the newest events first (the queue list, read once, is
// the other thousand items).
func TestEventsAcrossManyQueuesBounded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const queues = 1000
	pipe := f.rdb.Pipeline()
	for i := range queues {
		q := "q" + strconv.Itoa(i)
		pipe.SAdd(ctx, f.ns+":queues", q)
		for j := range 30 {
			at := strconv.Itoa(1_000_000 + j*queues + i) // queue i's newest is older than queue i+1's
			pipe.LPush(ctx, f.ns+":{"+q+"}:events", `{"type":"fenced","stage":"commit","job":"`+q+`-`+strconv.Itoa(j)+`","at":`+at+`}`)
		}
	}
	_, err := pipe.Exec(ctx)
	must(t, err)
	// the newest event of all, in the last queue
	_, err = f.client.Pause(ctx, "q999", "alice", "newest")
	must(t, err)

	h := f.handler(dashboard.Options{})
	var rt redistest.RoundTrips
	var n commandCount
	f.rdb.AddHook(&rt)
	f.rdb.AddHook(&n)
	var e struct {
		Events []struct{ Queue, Type, Job, Actor string } `json:"events"`
	}
	for _, path := range []string{"/api/events?limit=1000", "/api/events?type=operator", "/api/events?type=fenced&limit=5"} {
		rt.Reset()
		n.Reset()
		getJSON(t, h, path, &e)
		if rt.N() > 3 || n.N() > queues+3 || n.Items() > 20_000+queues {
			t.Fatalf("%s: %d round trips, %d commands, %d events read", path, rt.N(), n.N(), n.Items())
		}
		switch path {
		case "/api/events?type=operator":
			if len(e.Events) != 1 || e.Events[0].Queue != "q999" || e.Events[0].Actor != "operator:alice" {
				t.Fatalf("%s: %+v", path, e.Events)
			}
		case "/api/events?type=fenced&limit=5":
			want := []string{"q999-29", "q998-29", "q997-29", "q996-29", "q995-29"}
			for i, ev := range e.Events {
				if ev.Job != want[i] {
					t.Fatalf("%s: %+v, want jobs %v", path, e.Events, want)
				}
			}
			if len(e.Events) != 5 {
				t.Fatalf("%s: %+v", path, e.Events)
			}
		default:
			if len(e.Events) != 1000 || e.Events[0].Type != "pause" || e.Events[1].Job != "q999-29" {
				t.Fatalf("%s: %d events, first %+v", path, len(e.Events), e.Events[:2])
			}
		}
	}
}
