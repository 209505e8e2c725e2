package asynqfence_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRedeliverGivesAJobWhoseTaskIsGoneANewTask: asynq archives a task
// whose job the ledger holds uncertain (no retries left); nothing would
// deliver the job again. Redeliver enqueues a new task for it, whose
// delivery reconciles the job first (not applied: a failed attempt, and
// the job had no retry left, so it ends dead, its handler not run again,
// and asynq archives the new task), and then has nothing left to do.
func TestRedeliverGivesAJobWhoseTaskIsGoneANewTask(t *testing.T) {
	var runs atomic.Int32
	var reconciled atomic.Int32
	opts := asynqfence.Options{WorkerID: "in-process", Reconcile: func(string) asynqfence.ReconcileFunc {
		return func(context.Context, *jobs.Record) (jobs.Verdict, error) {
			reconciled.Add(1)
			return jobs.NotApplied, nil
		}
	}}
	p := startInProcessWith(t, opts, func(mux *asynq.ServeMux) {
		mux.HandleFunc("charge", func(ctx context.Context, _ *asynq.Task) error {
			if runs.Add(1) == 1 {
				return jobs.Unknown(errors.New("the card network timed out"))
			}
			return nil
		})
	})
	b := p.bridge
	ctx := context.Background()
	if n, err := b.Redeliver(ctx); err != nil || n != 0 {
		t.Fatalf("Redeliver with no bridged job: %d, %v", n, err)
	}
	charge := asynq.NewTaskWithHeaders("charge", []byte(`{"cents":5}`), map[string]string{"tenant": "acme"})
	if _, err := p.client.Enqueue(charge, asynq.TaskID("c1"), asynq.MaxRetry(0), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, asynqfence.ErrUncertain) {
		t.Fatalf("first delivery returned %v, want ErrUncertain", err)
	}
	insp := asynq.NewInspectorFromRedisClient(p.rdb)
	p.awaitTask(insp, "c1", asynq.TaskStateArchived)
	if rec := p.record("c1"); rec.State != jobs.Uncertain {
		t.Fatalf("job %s after its task was archived, want uncertain", rec.State)
	}

	n, err := b.Redeliver(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Redeliver: %d, %v; want the uncertain job delivered again", n, err)
	}
	if err := p.next(); !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("the new task's delivery returned %v, want the job dead (SkipRetry): its one attempt was found not applied", err)
	}
	rec := jobstest.WaitState(t, p.ledger, "default", "c1", jobs.Dead)
	if runs.Load() != 1 || reconciled.Load() != 1 || rec.Attempts != 1 || !strings.Contains(rec.Reason, "retries exhausted") {
		t.Fatalf("handler ran %d times, reconciled %d times, %d attempts, reason %q; want 1, 1, 1, retries exhausted",
			runs.Load(), reconciled.Load(), rec.Attempts, rec.Reason)
	}
	hist, err := p.ledger.History(ctx, "default", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if h := jobstest.History(hist); !strings.Contains(h, "redelivered") || !strings.Contains(h, "c1~1") {
		t.Fatalf("history does not say the job was delivered again as task c1~1: %s", h)
	}
	if info, err := insp.GetTaskInfo("default", "c1~1"); err != nil || info.Headers[asynqfence.JobHeader] != "c1" || info.Headers["tenant"] != "acme" {
		t.Fatalf("new task %+v, %v; want it to name job c1 and keep the archived task's headers", info, err)
	}
	if n, err := b.Redeliver(ctx); err != nil || n != 0 {
		t.Fatalf("Redeliver after the job went dead: %d, %v; want nothing", n, err)
	}
	if stats, _ := p.ledger.Stats(ctx, "default"); stats["redelivered"] != 1 {
		t.Fatalf("stats %v: want one redelivery counted", stats)
	}
}

// TestRedeliverLeavesLiveTasksAlone: a job whose task asynq will deliver
// again (a retry) is not given another.
func TestRedeliverLeavesLiveTasksAlone(t *testing.T) {
	var runs atomic.Int32
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("slow-retry", func(context.Context, *asynq.Task) error {
			runs.Add(1)
			return errors.New("try later")
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("slow-retry", []byte(`{}`)), asynq.TaskID("s1"), asynq.MaxRetry(1)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err == nil {
		t.Fatal("a failed attempt returned nil")
	}
	// The job is pending in the ledger; asynq holds its task (retry, or
	// already delivered again).
	if rec := p.record("s1"); rec.State != jobs.Pending && rec.State != jobs.Running {
		t.Fatalf("job %s", rec.State)
	}
	if n, err := p.bridge.Redeliver(context.Background()); err != nil || n != 0 {
		t.Fatalf("Redeliver: %d, %v; want nothing (asynq holds the task)", n, err)
	}
}
