package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// loseReply runs the first command naming key, then fails it with
// context.Canceled, as if the caller's context ended while the reply was
// on its way: the script ran, the caller does not know.
type loseReply struct {
	key  string
	lost atomic.Bool
}

func (h *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil {
			return err
		}
		return h.lose([]redis.Cmder{cmd})
	}
}

func (h *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil {
			return err
		}
		return h.lose(cmds)
	}
}

func (h *loseReply) lose(cmds []redis.Cmder) error {
	for _, c := range cmds {
		if c.Err() == nil && slices.Contains(c.Args(), any(h.key)) && !h.lost.Swap(true) {
			c.SetErr(context.Canceled)
			return context.Canceled
		}
	}
	return nil
}

// An Acquire whose reply is lost took the lease all the same: the
// retry by the same owner gets a *HeldError naming that owner, and the
// documented recovery (release the holding it names, acquire again) gets
// the lease with a new, higher token.
func TestAcquireWithALostReplyRecovers(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	m := lease.NewManager(c, lease.Config{Namespace: redistest.Namespace(t)})
	// Load the scripts first, so the lost call is one that ran.
	warm, err := m.Acquire(ctx, "warm", "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Release(ctx, warm)
	h := &loseReply{key: m.Key("res")}
	c.AddHook(h)

	if _, err := m.Acquire(ctx, "res", "w1", time.Minute); !errors.Is(err, context.Canceled) || !h.lost.Load() {
		t.Fatalf("acquire with the reply lost: %v, want context.Canceled", err)
	}
	_, err = m.Acquire(ctx, "res", "w1", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Owner != "w1" {
		t.Fatalf("retry: %v, want a *HeldError naming w1", err)
	}
	if err := m.Release(ctx, held.Lease()); err != nil {
		t.Fatalf("release of the holding the error names: %v", err)
	}
	l, err := m.Acquire(ctx, "res", "w1", time.Minute)
	if err != nil || l.Token <= held.Token {
		t.Fatalf("acquire after the release: %v (%v), want a token above %d", l, err, held.Token)
	}
}
