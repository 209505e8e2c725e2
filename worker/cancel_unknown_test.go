package worker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type gatewayArgs struct {
	Pay string `json:"pay"`
}

func (gatewayArgs) Kind() string { return "gateway" }

// gatewayWorker charges through a gateway whose answer can be lost: once
// an operator's stop request reaches it, the charge it sent lands
// (applied, or not when drop says so) and its call times out.
type gatewayWorker struct {
	mu      sync.Mutex
	applied map[string]bool
	drop    bool
}

func (w *gatewayWorker) Work(ctx context.Context, j *jobs.Job[gatewayArgs]) error {
	<-ctx.Done() // the operator's request reached the attempt mid-call
	w.mu.Lock()
	w.applied[j.OperationID] = !w.drop
	w.mu.Unlock()
	return fmt.Errorf("gateway: reading the answer: %w", os.ErrDeadlineExceeded)
}

func (w *gatewayWorker) Reconcile(ctx context.Context, j *jobs.Job[gatewayArgs]) (jobs.Verdict, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.applied[j.OperationID] {
		return jobs.Applied, nil
	}
	return jobs.NotApplied, nil
}

// TestAStopRequestDoesNotHideAnUnknownOutcome: an operator asks a running
// attempt of a kind that can be reconciled to stop, and its dependency call
// times out (the call may have reached the gateway, which may have taken
// the charge). The outcome is unknown, so the job goes uncertain rather
// than straight to cancelled, and the reconciler decides: a charge found
// applied makes the job succeeded (not a cancelled job whose effect
// happened, which an operator could re-run), one found not applied ends it
// cancelled, the operator's intent.
func TestAStopRequestDoesNotHideAnUnknownOutcome(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprint("dropped=", drop), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			p := e.pool(e.config())
			w := &gatewayWorker{applied: map[string]bool{}, drop: drop}
			_ = worker.Register(p, jobs.Worker[gatewayArgs](w))
			hooks := worker.InitHooks(p, t)
			e.start(p)
			res := e.enqueue(gatewayArgs{Pay: "42"}, jobs.OperationID("pay-42"))
			jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Running)
			if _, err := e.client.Cancel(ctx, "default", res.JobID, "alice", "customer withdrew"); err != nil {
				t.Fatal(err)
			}
			want, verdict := jobs.Succeeded, "applied"
			if drop {
				want, verdict = jobs.Cancelled, "not_applied"
			}
			hooks.Decided.WaitFor("the reconciler's verdict", func(d worker.Decision) bool { return d.JobID == res.JobID && d.Result == verdict })
			rec := jobstest.WaitState(t, e.ledger, "default", res.JobID, want)
			if rec.CancelledBy != "operator:alice" {
				t.Fatalf("cancel requested by %q, want alice", rec.CancelledBy)
			}
		})
	}
}
