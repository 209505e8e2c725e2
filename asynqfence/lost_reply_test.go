package asynqfence_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// loseCompleteReply is a go-redis hook that loses the reply of the first
// call of the ledger's completion script: the script runs in Redis, and the
// caller sees a connection reset, as when the connection breaks after
// sending.
type loseCompleteReply struct{ lost atomic.Bool }

var errConnReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

func (h *loseCompleteReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseCompleteReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.lose(cmd) {
			return errConnReset
		}
		return err
	}
}

func (h *loseCompleteReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if h.lose(cmd) {
				return errConnReset
			}
		}
		return err
	}
}

func (h *loseCompleteReply) lose(cmd redis.Cmder) bool {
	args := cmd.Args()
	if cmd.Name() != "fcall" || len(args) < 2 || !strings.HasSuffix(fmt.Sprint(args[1]), "_complete") ||
		cmd.Err() != nil || !h.lost.CompareAndSwap(false, true) {
		return false
	}
	cmd.SetErr(errConnReset)
	return true
}

// A delivery's completion whose reply was lost (the connection broke after
// the script ran) is sent again, as a pool's completer sends it: the retry
// finds the job ended by this attempt's token as the outcome ends it, and
// the delivery reports the success to asynq instead of failing a task whose
// job succeeded.
func TestDeliveryCompletionWithALostReplyIsRetried(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	var hook loseCompleteReply
	lossy := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	lossy.AddHook(&hook)
	t.Cleanup(func() { _ = lossy.Close() })
	b, err := asynqfence.New(lossy, jobs.Config{Namespace: ns}, asynqfence.Options{WorkerID: "in-process", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	mux, returned := bridgedMux(t, b)
	mux.HandleFunc("invoice", func(context.Context, *asynq.Task) error {
		runs.Add(1)
		return nil
	})
	conf := testServerConfig()
	conf.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return time.Hour }
	server := asynq.NewServerFromRedisClient(rdb, conf)
	if err := server.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Shutdown)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("invoice", []byte(`{"n":1}`)), asynq.TaskID("i1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the succeeded delivery whose commit reply was lost returned %v to asynq, want nil", err)
	}
	if !hook.lost.Load() {
		t.Fatal("no completion reply was lost: the test did not test anything")
	}
	lg := ledger.New(rdb, ledger.Config{Namespace: ns})
	if rec, err := lg.Get(context.Background(), "default", "i1"); err != nil || rec.State != jobs.Succeeded || rec.Attempts != 1 {
		t.Fatalf("the job after the delivery: %+v, %v; want succeeded in one attempt", rec, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}
