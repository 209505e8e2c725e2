package jobs

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds how many script calls share one pipeline.
const maxBatch = 64

// batchTimeout bounds one pipeline round trip.
const batchTimeout = 5 * time.Second

// call is one script call waiting for a shared pipeline.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	reply  any
	err    error
	done   chan struct{}
}

// batcher sends the script calls of many goroutines (a pool's workers) in
// shared pipelines: while one pipeline is in flight, the calls that arrive
// queue up and go together in the next. An idle ledger adds no latency; a
// busy one saves a round trip per call.
type batcher struct {
	rdb     redis.UniversalClient
	ch      chan *call
	stopped chan struct{} // closed when the loop has exited
}

// StartBatching makes the ledger send claims, renewals and commits from
// concurrent callers in shared pipelines until ctx ends. Worker pools call
// it in Run.
func (l *Ledger) StartBatching(ctx context.Context) {
	b := &batcher{rdb: l.rdb, ch: make(chan *call, maxBatch), stopped: make(chan struct{})}
	l.batch.Store(b)
	go func() {
		<-ctx.Done()
		l.batch.CompareAndSwap(b, nil)
	}()
	go b.loop(ctx)
}

// run executes script directly, or through the batcher when one runs.
func (l *Ledger) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	b := l.batch.Load()
	if b == nil {
		return script.Run(ctx, l.rdb, keys, args...)
	}
	c := &call{script: script, keys: keys, args: args, done: make(chan struct{})}
	cmd := redis.NewCmd(ctx)
	select {
	case b.ch <- c:
	case <-b.stopped:
		return script.Run(ctx, l.rdb, keys, args...)
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
		return cmd
	}
	select {
	case <-c.done:
		cmd.SetVal(c.reply)
		cmd.SetErr(c.err)
	case <-ctx.Done(): // the call may still run: its outcome is unknown
		cmd.SetErr(ctx.Err())
	}
	return cmd
}

func (b *batcher) loop(ctx context.Context) {
	defer close(b.stopped)
	for {
		var first *call
		select {
		case <-ctx.Done():
			b.drain(context.WithoutCancel(ctx))
			return
		case first = <-b.ch:
		}
		batch := []*call{first}
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-b.ch:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.exec(context.WithoutCancel(ctx), batch)
	}
}

// drain runs what is still queued when the batcher stops.
func (b *batcher) drain(ctx context.Context) {
	for {
		select {
		case c := <-b.ch:
			b.exec(ctx, []*call{c})
		default:
			return
		}
	}
}

func (b *batcher) exec(ctx context.Context, batch []*call) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		c.reply, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range batch {
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
