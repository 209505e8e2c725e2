// Package scriptbatch sends the Lua script calls of many goroutines in shared
// pipelines.
//
// A call made while no pipeline is in flight goes out at once, on the
// caller's goroutine, so an idle client adds no latency and no goroutine.
// Calls that arrive while one is in flight queue up and go together in the
// next pipeline, sent by a goroutine that lives only while the queue is not
// empty. A busy client therefore pays one round trip (and one pair of
// read/write system calls on each side) per batch instead of per call.
//
// Used by the lease manager (acquire, renew, release) and the job ledger
// (claim, renew, commit).
package scriptbatch

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/testsignal"
)

// MaxBatch bounds how many calls share one pipeline.
const MaxBatch = 64

// Timeout bounds the round trip of a queued batch. A queued call no longer
// runs under its caller's context (others share its pipeline), so this is
// what stops it waiting for an unresponsive server forever.
const Timeout = 5 * time.Second

// call is one script call waiting for a shared pipeline.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	reply  any
	err    error
	done   chan struct{}
}

// Batcher batches script calls on one client. The zero value is not usable;
// call New. A Batcher is safe for concurrent use and needs no stopping.
type Batcher struct {
	rdb   redis.UniversalClient
	mu    sync.Mutex
	busy  bool // a call or a pipeline is in flight
	queue []*call
	hooks hooks
}

// hooks are signals tests wait on (see internal/testsignal); inert unless
// a test initialised them (export_test.go).
type hooks struct {
	direct testsignal.Signal[struct{}] // a call went out at once: the batcher is busy
	queued testsignal.Signal[int]      // a call was queued (the queue's length)
}

// New returns a Batcher over rdb.
func New(rdb redis.UniversalClient) *Batcher { return &Batcher{rdb: rdb} }

// Run runs script like script.Run(ctx, rdb, keys, args...), in a shared
// pipeline when others are in flight. When ctx ends before the reply
// arrives, Run returns ctx.Err() and the call may still run: its outcome is
// unknown, as with any request whose reply was lost.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		b.hooks.direct.Signal(struct{}{})
		cmd := script.Run(ctx, b.rdb, keys, args...)
		b.handOver()
		return cmd
	}
	c := &call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	n := len(b.queue)
	b.mu.Unlock()
	b.hooks.queued.Signal(n)
	cmd := redis.NewCmd(ctx)
	select {
	case <-c.done:
		cmd.SetVal(c.reply)
		cmd.SetErr(c.err)
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
	}
	return cmd
}

// handOver ends a direct call: the calls queued meanwhile are sent by a
// flushing goroutine, so the direct caller returns at once.
func (b *Batcher) handOver() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.busy = false
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.flush()
}

// flush sends the queue in batches until it is empty.
func (b *Batcher) flush() {
	for {
		runtime.Gosched()
		b.mu.Lock()
		n := min(len(b.queue), MaxBatch)
		if n == 0 {
			b.busy = false
			b.queue = nil
			b.mu.Unlock()
			return
		}
		batch := make([]*call, n)
		copy(batch, b.queue)
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.exec(batch)
	}
}

func (b *Batcher) exec(batch []*call) {
	// Calls whose callers gave up before their turn are not sent.
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if len(live) == 1 {
		c := live[0]
		c.reply, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range live {
		c.reply, c.err = cmds[i].Result()
		if c.err != nil && isNoScript(c.err) {
			// The server lost its script cache (a restart): EVALSHA did
			// nothing, so running the script again is safe.
			c.reply, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
		}
		close(c.done)
	}
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}
