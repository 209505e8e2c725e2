package asynqfence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestCancelStandsWhenTheBridgeFindsTheEffectNotApplied: an operator
// cancels a bridged job while its handler runs; the handler, stopped,
// reports an unknown outcome, so the job is uncertain. The bridge's
// reconcile at the next delivery finds the effect not applied: the
// operator's cancel stands (the job ends cancelled, as the maintenance
// leader's reconciler ends it), and the handler does not run again.
func TestCancelStandsWhenTheBridgeFindsTheEffectNotApplied(t *testing.T) {
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	opts := asynqfence.Options{WorkerID: "in-process", LeaseTTL: 3 * time.Second, // the cancel must find the attempt still running on a loaded machine
		Reconcile: func(string) asynqfence.ReconcileFunc {
			return func(context.Context, *jobs.Record) (jobs.Verdict, error) { return jobs.NotApplied, nil }
		}}
	p := startInProcessWith(t, opts, func(mux *asynq.ServeMux) {
		mux.HandleFunc("note", func(ctx context.Context, _ *asynq.Task) error {
			if runs.Add(1) > 1 {
				return nil
			}
			started <- struct{}{}
			<-ctx.Done()
			return jobs.Unknown(context.Cause(ctx))
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
	ctx := context.Background()
	if st, err := p.ledger.Cancel(ctx, "default", "c1", "operator:ada", "wrong account"); err != nil || st != jobs.Running {
		t.Fatalf("cancel: %s, %v", st, err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrUncertain) {
		t.Fatalf("the stopped attempt returned %v, want ErrUncertain", err)
	}
	_ = p.next() // the next delivery, reconciled
	rec := p.record("c1")
	if rec.State != jobs.Cancelled || runs.Load() != 1 {
		t.Fatalf("job %s (reason %q) after %d runs: an operator's cancel found not applied must end it cancelled, not run it again",
			rec.State, rec.Reason, runs.Load())
	}
}
