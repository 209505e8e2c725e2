// Package scriptbatch sends the Lua script calls of many goroutines in shared
// pipelines, keeping a few pipelines in flight at once.
//
// A Batcher has a budget of pipelines in flight (Options.InFlight). A call
// made while the budget is not used up goes out at once, on the caller's
// goroutine, so an idle client adds no latency and no goroutine. Calls that
// arrive while every slot of the budget is in flight queue up and go
// together in the next pipeline, sent by the first slot to free up (a
// goroutine that lives only while the queue is not empty). A busy client
// therefore pays one round trip (and one pair of read/write system calls on
// each side) per batch instead of per call, and still has several round
// trips overlapping, so neither side waits for the other.
//
// # Ordering
//
// A Batcher never reorders calls made one after another: a call made after
// another returned is sent after it, so it runs after it. Calls made while
// others are in flight are queued and sent in the order they were made, but
// with InFlight above 1 the pipelines in flight at once may run in any
// order. With InFlight 1, calls run exactly in the order they were made.
// Callers that need an order between concurrent calls must wait for one
// before making the other (the ledger's calls for one job are made so:
// claim, then renewals, then the completion, each after the previous one's
// reply). A call whose caller gave up (its context ended) may still run
// later, as with any request whose reply was lost.
//
// # Balanced batches
//
// With Options.Balance, a call goes out at once only when nothing is in
// flight. Otherwise it is queued, and a free slot of the budget sends the
// queue only once it holds as many calls as a pipeline in flight carries
// on average (or when nothing else is in flight): many concurrent callers
// then fill a few pipelines of like size that overlap, instead of a free
// slot carrying each call that finds it alone. A queued call still waits at
// most until a pipeline in flight comes back, as when the budget is used
// up; a lone caller still goes out at once.
//
// Separate Batchers (lanes) share nothing: the job ledger keeps one per
// kind of call, so that a claim never waits behind a backlog of
// completions.
//
// Used by the lease manager (acquire, renew, release) and the job ledger
// (claim, renew, complete, enqueue, and the rest).
package scriptbatch

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/luafunc"
	"github.com/fencedq/fencedq/internal/testsignal"
)

// MaxBatch bounds how many calls share one pipeline.
const MaxBatch = 64

// MaxInFlight bounds Options.InFlight.
const MaxInFlight = 16

// Timeout bounds the round trip of a queued batch. A queued call no longer
// runs under its caller's context (others share its pipeline), so this is
// what stops it waiting for an unresponsive server forever.
const Timeout = 5 * time.Second

// DefaultInFlight is the in-flight budget of a Batcher whose Options leave
// it zero: GOMAXPROCS, at least 2 and at most 4. Two pipelines in flight
// already let the client prepare one batch while Redis runs the other;
// more than a few only make batches smaller.
func DefaultInFlight() int { return min(max(runtime.GOMAXPROCS(0), 2), 4) }

// Options configure a Batcher. The zero value is usable.
type Options struct {
	// InFlight bounds the pipelines (or single calls) in flight at once
	// (default DefaultInFlight(); at most MaxInFlight). 1 keeps calls in
	// the order they were made.
	InFlight int
	// Append, when set, is called for every pipeline the Batcher sends,
	// after its script calls were queued on pipe: it may queue one more
	// command (a WAIT for replicas, say) and returns a check of that
	// command's reply, run once the pipeline's replies arrived. When the
	// check returns an error, every call of the pipeline that did not fail
	// on its own fails with it (its script ran: its effect is there but
	// not acknowledged), its reply kept beside the error. With Append set,
	// a lone call goes out as a pipeline too, and on Redis Cluster each
	// master owning a call's first key gets a pipeline of its own (with
	// the command appended).
	Append func(ctx context.Context, pipe redis.Pipeliner) (check func() error)
	// Yield lets the callers a pipeline's replies woke run before the
	// slot looks at the queue again (runtime.Gosched): callers that call
	// again at once (a lease released right after it was acquired) then
	// queue up for the next pipeline instead of finding the slot given
	// back and going out one by one. Pipelines get fuller, at the cost of
	// a scheduler pass per pipeline.
	Yield bool
	// Balance keeps the pipelines in flight of like size (see "Balanced
	// batches"): for a lane of many concurrent callers whose calls merge
	// (see Merge), where fewer, larger script calls save more than a free
	// slot's earlier start.
	Balance bool
}

// Script is a script a Batcher runs: a go-redis Script, or a function of a
// library (internal/luafunc), which a call that finds it missing loads.
type Script interface {
	Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd
	Eval(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd
}

// call is one script call waiting for a shared pipeline.
type call struct {
	ctx    context.Context
	script Script
	keys   []string
	args   []any
	reply  any
	err    error
	done   chan struct{}
	merge  *Merge  // nil: never merged
	merged *merged // a merged call: the calls it stands for
}

// Batcher batches script calls on one client. The zero value is not usable;
// call New. A Batcher is safe for concurrent use and needs no stopping.
type Batcher struct {
	rdb      redis.UniversalClient
	inFlight int // the budget
	append   func(ctx context.Context, pipe redis.Pipeliner) func() error
	yield    bool
	balance  bool

	mu    sync.Mutex
	busy  int // slots in flight: direct calls and flushing goroutines
	calls int // calls in the pipelines in flight
	queue []*call
	hooks hooks
}

// hooks are signals tests wait on (see internal/testsignal); inert unless
// a test initialised them (export_test.go).
type hooks struct {
	direct testsignal.Signal[struct{}]     // a call went out at once, taking a slot
	queued testsignal.Signal[int]          // a call was queued (the queue's length)
	node   testsignal.Signal[NodePipeline] // a pipeline went to one cluster node
}

// New returns a Batcher over rdb.
func New(rdb redis.UniversalClient, o Options) *Batcher {
	n := o.InFlight
	if n <= 0 {
		n = DefaultInFlight()
	}
	return &Batcher{rdb: rdb, inFlight: min(n, MaxInFlight), append: o.Append, yield: o.Yield, balance: o.Balance}
}

// Run runs script like script.Run(ctx, rdb, keys, args...), in a shared
// pipeline when the Batcher's in-flight budget is used up. When ctx ends
// before the reply arrives, Run returns ctx.Err() and the call may still
// run: its outcome is unknown, as with any request whose reply was lost.
func (b *Batcher) Run(ctx context.Context, script Script, keys []string, args ...any) *redis.Cmd {
	return b.run(ctx, []*call{{ctx: ctx, script: script, keys: keys, args: args}})[0]
}

// Call is one script call of RunAll.
type Call struct {
	Script Script
	Keys   []string
	Args   []any
}

// RunAll runs calls as Run runs each, sent together: in one pipeline on a
// free slot of the budget, else queued together for the next pipeline
// (split only past MaxBatch). Its replies are in the order of calls. A
// caller with calls for several keys (a pool's completions of several
// queues) pays one round trip instead of one per call.
func (b *Batcher) RunAll(ctx context.Context, calls []Call) []*redis.Cmd {
	cs := make([]*call, len(calls))
	for i, c := range calls {
		cs[i] = &call{ctx: ctx, script: c.Script, keys: c.Keys, args: c.Args}
	}
	return b.run(ctx, cs)
}

// run sends cs (at least one call) and returns their replies.
func (b *Batcher) run(ctx context.Context, cs []*call) []*redis.Cmd {
	b.mu.Lock()
	if b.busy < b.inFlight && (!b.balance || b.busy == 0) {
		// A free slot means the queue is empty (slots are given back
		// only once it is), or, balanced, that nothing is in flight.
		b.busy++
		b.calls += len(cs)
		b.mu.Unlock()
		b.hooks.direct.Signal(struct{}{})
		for _, c := range cs {
			alone(c)
		}
		b.send(ctx, cs)
		b.handOver(len(cs))
		return replies(ctx, cs)
	}
	for _, c := range cs {
		c.done = make(chan struct{})
	}
	b.queue = append(b.queue, cs...)
	n := len(b.queue)
	var batch []*call
	if b.busy < b.inFlight && b.due(b.busy) {
		// Balanced: the queue is as large as the pipelines in flight;
		// this caller sends it on a free slot.
		b.busy++
		batch = b.take()
	}
	b.mu.Unlock()
	b.hooks.queued.Signal(n)
	if batch != nil {
		b.sendQueued(batch)
		b.handOver(len(batch))
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			return replies(ctx, cs)
		}
	}
	return replies(ctx, cs)
}

// replies turns calls into commands: a call whose reply has not arrived
// (ctx ended first) gets ctx's error.
func replies(ctx context.Context, cs []*call) []*redis.Cmd {
	out := make([]*redis.Cmd, len(cs))
	for i, c := range cs {
		cmd := redis.NewCmd(ctx)
		out[i] = cmd
		if c.done != nil {
			select {
			case <-c.done:
			default:
				cmd.SetErr(ctx.Err())
				continue
			}
		}
		cmd.SetVal(c.reply)
		cmd.SetErr(c.err)
	}
	return out
}

// due reports, with b.mu held, whether a slot may send the queue now while
// others slots are in flight: always, unless balanced, when only while
// nothing else is in flight or the queue holds as many calls as the
// pipelines in flight carry on average.
func (b *Batcher) due(others int) bool {
	return len(b.queue) > 0 && (!b.balance || others == 0 || len(b.queue)*others >= b.calls)
}

// take removes the next batch from the queue (b.mu held) and counts it in
// flight.
func (b *Batcher) take() []*call {
	n := min(len(b.queue), MaxBatch)
	batch := make([]*call, n)
	copy(batch, b.queue)
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil
	}
	b.calls += n
	return batch
}

// handOver ends a slot's pipeline of n calls: the slot flushes the calls
// queued meanwhile on a goroutine of its own, so its caller returns at
// once; with nothing queued (balanced: not enough, while others are in
// flight, whose return sends them) the slot is given back.
func (b *Batcher) handOver(n int) {
	b.mu.Lock()
	b.calls -= n
	if !b.due(b.busy - 1) {
		b.busy--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.flush()
}

// flush sends the queue in batches until it is empty (balanced: until it
// is not due), then gives its slot back.
func (b *Batcher) flush() {
	for {
		b.mu.Lock()
		if !b.due(b.busy - 1) {
			b.busy--
			b.mu.Unlock()
			return
		}
		batch := b.take()
		b.mu.Unlock()
		b.sendQueued(batch)
		b.mu.Lock()
		b.calls -= len(batch)
		b.mu.Unlock()
		if b.yield {
			runtime.Gosched()
		}
	}
}

// sendQueued sends queued calls under the batch timeout, mergeable ones
// merged (see Merge), and wakes their callers. Calls whose callers gave up
// before their turn are not sent.
func (b *Batcher) sendQueued(batch []*call) {
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
	sent := mergeCalls(live)
	b.send(ctx, sent)
	cancel()
	split(sent)
	for _, c := range live {
		close(c.done)
	}
}

// send runs calls and sets each one's reply and error: a lone call as a
// plain script call, more (or any, with Append) in one pipeline.
func (b *Batcher) send(ctx context.Context, calls []*call) {
	defer b.reloadAfterNodeLoss(calls)
	if len(calls) == 1 && b.append == nil {
		c := calls[0]
		c.reply, c.err = c.script.Run(ctx, b.rdb, c.keys, c.args...).Result()
		return
	}
	cmds := make([]*redis.Cmd, len(calls))
	b.pipeline(ctx, calls, cmds, false)
	for try := 0; try < 2; try++ {
		// The server lacked a script or a function library (a restart, a
		// new server, another version): nothing ran for those calls, so
		// running them again is safe. Function libraries are loaded and
		// the calls sent by name again; else (or if still missing) they go
		// with the scripts' text.
		var again []*call
		for i, c := range calls {
			if luafunc.IsMissing(cmds[i].Err()) {
				again = append(again, c)
			}
		}
		if len(again) == 0 {
			return
		}
		withSource := try == 1 || !b.loadLibraries(ctx, again)
		calls = again
		b.pipeline(ctx, calls, cmds[:len(calls)], withSource)
	}
}

// loadLibraries loads the function libraries of calls' scripts on the
// Batcher's server, and reports whether every call's script is a function
// of a library now loaded.
func (b *Batcher) loadLibraries(ctx context.Context, calls []*call) bool {
	loaded := map[*luafunc.Library]bool{}
	for _, c := range calls {
		l, ok := c.script.(luafunc.Loader)
		if !ok {
			return false
		}
		lib := l.Library()
		if lib == nil {
			return false // a plain script: sent with its text
		}
		if _, done := loaded[lib]; !done {
			loaded[lib] = lib.Load(ctx, b.rdb) == nil && lib.Available()
		}
		if !loaded[lib] {
			return false
		}
	}
	return true
}

// pipeline sends calls in one pipeline, by SHA or (withSource) with each
// script's source, plus the Append command, and sets each call's reply. On
// Redis Cluster with Append set, the calls are split by the master owning
// their first key and each master gets a pipeline of its own with the
// Append command, on one connection to it, so a WAIT covers the writes of
// the scripts it follows.
func (b *Batcher) pipeline(ctx context.Context, calls []*call, cmds []*redis.Cmd, withSource bool) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok || b.append == nil {
		b.pipelineOn(ctx, b.rdb, calls, cmds, withSource)
		return
	}
	type group struct {
		node  *redis.Client
		idx   []int
		calls []*call
	}
	var groups []*group
	byNode := map[*redis.Client]*group{}
	for i, c := range calls {
		var node *redis.Client
		var err error
		if len(c.keys) == 0 {
			err = errors.New("scriptbatch: a script call without keys cannot be routed to a cluster node")
		} else {
			node, err = cc.MasterForKey(ctx, c.keys[0])
		}
		if err != nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(err)
			c.reply, c.err = nil, err
			continue
		}
		g := byNode[node]
		if g == nil {
			g = &group{node: node}
			byNode[node] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
		g.calls = append(g.calls, c)
	}
	var wg sync.WaitGroup
	moved := false
	var mu sync.Mutex
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := make([]*redis.Cmd, len(g.calls))
			b.pipelineOn(ctx, g.node, g.calls, sub, withSource)
			b.hooks.node.Signal(NodePipeline{Addr: g.node.Options().Addr, Calls: len(g.calls)})
			for j, i := range g.idx {
				cmds[i] = sub[j]
				if isRedirect(sub[j].Err()) {
					mu.Lock()
					moved = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if moved {
		// A slot moved: the script did not run there. The call fails (its
		// caller retries) and the next pipeline is routed by the new map.
		cc.ReloadState(ctx)
	}
}

// reloadAfterNodeLoss asks a cluster client to reload its slot map when a
// call failed without a reply from Redis (a refused dial, a reset
// connection): the node may be a master that died and whose replica now
// serves its slots. go-redis reloads the map on a redirect, or on its own
// only every ClusterStateReloadInterval (a minute by default), so without
// this every call to those slots would fail until then. Reloads are
// coalesced by the client.
func (b *Batcher) reloadAfterNodeLoss(calls []*call) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, c := range calls {
		var re redis.Error
		if c.err != nil && !errors.As(c.err, &re) && !errors.Is(c.err, context.Canceled) &&
			!errors.Is(c.err, context.DeadlineExceeded) {
			cc.ReloadState(context.Background())
			return
		}
	}
}

// NodePipeline describes a pipeline sent to one cluster node (a test
// signal).
type NodePipeline struct {
	Addr  string // the node's address
	Calls int    // the script calls it carried
}

// pipelineOn sends calls in one pipeline on rdb (see pipeline).
func (b *Batcher) pipelineOn(ctx context.Context, rdb redis.Cmdable, calls []*call, cmds []*redis.Cmd, withSource bool) {
	pipe := rdb.Pipeline()
	for i, c := range calls {
		if withSource {
			cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
		} else {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	var check func() error
	if b.append != nil {
		check = b.append(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx)
	var ackErr error
	if check != nil {
		ackErr = check()
	}
	for i, c := range calls {
		c.reply, c.err = cmds[i].Result()
		if c.err == nil && ackErr != nil {
			// The script ran, unacknowledged: its reply stays for callers
			// that must know what it did (a claim puts its jobs back).
			c.err = ackErr
		}
	}
}

func isRedirect(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && (strings.HasPrefix(re.Error(), "MOVED ") || strings.HasPrefix(re.Error(), "ASK "))
}
