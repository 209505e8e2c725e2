package worker_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
)

// cancelAfter cancels a context once a command matching match was
// answered: a Run stopped right after that command landed.
type cancelAfter struct {
	match  func(args []any) bool
	cancel context.CancelFunc
}

func (h cancelAfter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cancelAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.match(cmd.Args()) {
			h.cancel()
		}
		return err
	}
}

func (h cancelAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A Run whose context ends just after its first heartbeat landed (the
// join's SET NX), before the start finished, returns nil and leaves no
// heartbeat claiming the pool is alive: a pool started again with its
// WorkerID starts at once instead of waiting for that heartbeat to lapse.
func TestRunStoppedMidJoinLeavesNoHeartbeat(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	cfg := e.config()
	cfg.WorkerID = "stopped-mid-join"
	key := e.ns + ":pool:" + cfg.WorkerID

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb.AddHook(cancelAfter{cancel: cancel, match: func(args []any) bool {
		return len(args) > 2 && args[0] == "set" && args[1] == key && slices.Contains(args, any("nx"))
	}})
	if err := e.pool(cfg).Run(ctx); err != nil {
		t.Fatalf("Run stopped while joining = %v, want nil", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the join's SET NX was never sent")
	}
	check := srv.Client()
	if n, err := check.Exists(context.Background(), key).Result(); err != nil || n != 0 {
		t.Errorf("heartbeat left by a pool stopped while starting: exists=%d, %v", n, err)
	}
	if err := check.ZScore(context.Background(), e.ns+":pools", cfg.WorkerID).Err(); err != redis.Nil {
		t.Errorf("pool still listed after it stopped while starting: %v", err)
	}
}
