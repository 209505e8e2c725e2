package redisfence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// slowBegin delays the reply to Guard's begin script, as a slow network
// would: the pending record's TTL runs on the server from the moment the
// script ran, not from the moment its reply arrived.
type slowBegin struct{ delay time.Duration }

func (slowBegin) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slowBegin) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if slices.Contains(cmd.Args(), any("begin")) {
			time.Sleep(h.delay)
		}
		return err
	}
}

func (slowBegin) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Guard's callback context ends no later than the pending record that
// holds the operation expires, however long the begin script's reply took
// to arrive: once the record is gone another request may run the
// operation, so the first callback must have been told to stop by then.
func TestGuardContextEndsByThePendingRecordsExpiry(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	c.AddHook(slowBegin{delay: 300 * time.Millisecond})
	s, err := redisfence.New(c, redisfence.Config{Namespace: redistest.Namespace(t), PendingTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	f := fz("acct:1", 10, "w", "op-1")
	err = s.Guard(ctx, f, func(rctx context.Context) error {
		deadline, ok := rctx.Deadline()
		if !ok {
			t.Fatal("the callback's context has no deadline")
		}
		expiry, err := c.PExpireTime(ctx, s.EffectKey(f.Resource, f.OperationID)).Result()
		if err != nil {
			return err
		}
		if end := time.UnixMilli(int64(expiry / time.Millisecond)); deadline.After(end.Add(time.Millisecond)) {
			t.Errorf("the callback's context ends at %v, %v after its pending record expires (%v)",
				deadline.Format(time.StampMicro), deadline.Sub(end), end.Format(time.StampMicro))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
