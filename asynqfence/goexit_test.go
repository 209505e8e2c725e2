package asynqfence_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestGoexitInHandlerIsRetried: a handler that ends its goroutine
// (runtime.Goexit, as t.FailNow does) has its attempt committed as a
// panic's, a retry, instead of the bridge renewing its lease forever: the
// job is not left running, and asynq's delivery after the task's timeout
// runs it.
func TestGoexitInHandlerIsRetried(t *testing.T) {
	var exits atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("exit", func(ctx context.Context, _ *asynq.Task) error {
			if id, _ := asynq.GetTaskID(ctx); id == "g1" && exits.Add(1) == 1 {
				runtime.Goexit()
			}
			return nil
		})
	})
	// A first delivery readies the ledger's scripts, so that the short
	// timeout below bounds only the deliveries under test.
	if _, err := p.client.Enqueue(asynq.NewTask("exit", []byte(`{}`)), asynq.TaskID("warm")); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err != nil {
		t.Fatal(err)
	}
	// asynq answers a handler that never returned once the task's timeout passes.
	if _, err := p.client.Enqueue(asynq.NewTask("exit", []byte(`{}`)), asynq.TaskID("g1"), asynq.MaxRetry(3),
		asynq.Timeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	redistest.Await(t, p.rdb, "", "the job of the attempt that ended its goroutine leaves running", func() bool {
		rec, err := p.ledger.Get(context.Background(), "default", "g1")
		return err == nil && rec.State != jobs.Running
	})
	if rec := p.record("g1"); rec.State != jobs.Pending || rec.Attempts != 1 || !strings.Contains(rec.Error, "Goexit") {
		t.Fatalf("after the attempt the job is %s after %d attempts, error %q: want a retry", rec.State, rec.Attempts, rec.Error)
	}
	if err := p.next(); err != nil {
		t.Fatalf("asynq's next delivery returned %v, want the job run", err)
	}
	if rec := p.record("g1"); rec.State != jobs.Succeeded || rec.Attempts != 2 {
		t.Fatalf("after asynq's next delivery the job is %s after %d attempts, want succeeded after 2", rec.State, rec.Attempts)
	}
}
