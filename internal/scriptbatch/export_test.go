package scriptbatch

import "github.com/fencedq/fencedq/internal/testsignal"

// InitHooks initialises b's test signals for tb: direct (a call went out
// at once, so b is busy) and queued (a call was queued behind it). Call it
// before b runs anything.
func InitHooks(b *Batcher, tb testsignal.TB) (direct *testsignal.Signal[struct{}], queued *testsignal.Signal[int]) {
	b.hooks.direct.Init(tb, "call sent at once")
	b.hooks.queued.Init(tb, "call queued")
	return &b.hooks.direct, &b.hooks.queued
}

// InitNodeHook initialises b's signal of pipelines sent to one cluster
// node. Call it before b runs anything.
func InitNodeHook(b *Batcher, tb testsignal.TB) *testsignal.Signal[NodePipeline] {
	b.hooks.node.Init(tb, "pipeline sent to a cluster node")
	return &b.hooks.node
}
