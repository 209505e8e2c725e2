package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts a client's round trips: a
// command sent alone, or a whole pipeline, is one. Add it with AddHook;
// tests bound what a call costs with it.
type RoundTrips struct{ n atomic.Int64 }

// N returns the round trips counted since the last Reset.
func (r *RoundTrips) N() int64 { return r.n.Load() }

// Reset sets the count back to zero.
func (r *RoundTrips) Reset() { r.n.Store(0) }

// DialHook passes dials through.
func (*RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command sent alone.
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline once.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}
