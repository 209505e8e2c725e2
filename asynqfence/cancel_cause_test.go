package asynqfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestPermanentCancelCauseEndsTheBridgedJobCancelled: an operator cancels
// a bridged job while its handler runs, and the handler returns its
// context's cause marked permanent: that says only that it stopped, so
// the job ends cancelled (the operator's intent), not dead, as in a pool.
// (A lease of 3s: renewals, which carry the cancel, every second, and no
// lease lost on a loaded machine.)
func TestPermanentCancelCauseEndsTheBridgedJobCancelled(t *testing.T) {
	started := make(chan struct{}, 1)
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", LeaseTTL: 3 * time.Second}, func(mux *asynq.ServeMux) {
		mux.HandleFunc("note", func(ctx context.Context, _ *asynq.Task) error {
			started <- struct{}{}
			<-ctx.Done()
			return jobs.Permanent(context.Cause(ctx))
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("note", []byte(`{}`)), asynq.TaskID("c1"), asynq.MaxRetry(5)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	if st, err := p.ledger.Cancel(context.Background(), "default", "c1", "operator:ada", "wrong account"); err != nil || st != jobs.Running {
		t.Fatalf("cancel: %s, %v", st, err)
	}
	err := p.next()
	if rec := p.record("c1"); rec.State != jobs.Cancelled || !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("job %s (reason %q), delivery returned %v; want cancelled, the task archived", rec.State, rec.Reason, err)
	}
}
