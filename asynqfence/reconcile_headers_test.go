package asynqfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// headedWorker leaves its first attempt's outcome unknown, and records
// the headers its Reconcile sees.
type headedWorker struct {
	seen *testsignal.Signal[map[string]string]
}

func (w headedWorker) Work(_ context.Context, j *jobs.Job[transferArgs]) error {
	if j.Attempt == 1 {
		return jobs.Unknown(errors.New("the reply was lost"))
	}
	return nil
}

func (w headedWorker) Reconcile(_ context.Context, j *jobs.Job[transferArgs]) (jobs.Verdict, error) {
	w.seen.Signal(j.Headers)
	return jobs.Applied, nil
}

// TestReconcileSeesTheTasksHeaders: the bridge asks a worker's Reconcile
// (and Options.Reconcile) about an uncertain job with the delivering
// task's headers (a tenant id, a trace context), as the worker's Work gets
// them.
func TestReconcileSeesTheTasksHeaders(t *testing.T) {
	headers := map[string]string{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	t.Run("worker", func(t *testing.T) {
		var seen testsignal.Signal[map[string]string]
		seen.Init(t, "the headers Reconcile sees")
		p := startInProcess(t, func(mux *asynq.ServeMux) {
			asynqfence.Handle(mux, jobs.Worker[transferArgs](headedWorker{&seen}))
		})
		if _, err := p.client.Enqueue(asynq.NewTaskWithHeaders("transfer", []byte(`{"cents":250}`), headers), asynq.MaxRetry(5)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); !errors.Is(err, asynqfence.ErrUncertain) {
			t.Fatalf("the first delivery returned %v, want ErrUncertain", err)
		}
		if got := seen.WaitOrTimeout(); got["tenant"] != "acme" || got["traceparent"] != headers["traceparent"] {
			t.Fatalf("Reconcile saw headers %v, want the task's %v", got, headers)
		}
	})
	t.Run("options", func(t *testing.T) {
		var seen testsignal.Signal[map[string]string]
		seen.Init(t, "the headers Options.Reconcile sees")
		opts := asynqfence.Options{WorkerID: "in-process", Reconcile: func(string) asynqfence.ReconcileFunc {
			return func(_ context.Context, rec *jobs.Record) (jobs.Verdict, error) {
				seen.Signal(rec.Headers)
				return jobs.Applied, nil
			}
		}}
		p := startInProcessWith(t, opts, func(mux *asynq.ServeMux) {
			mux.HandleFunc("note", func(context.Context, *asynq.Task) error {
				return jobs.Unknown(errors.New("the reply was lost"))
			})
		})
		if _, err := p.client.Enqueue(asynq.NewTaskWithHeaders("note", []byte(`{}`), headers), asynq.MaxRetry(5)); err != nil {
			t.Fatal(err)
		}
		if err := p.next(); !errors.Is(err, asynqfence.ErrUncertain) {
			t.Fatalf("the first delivery returned %v, want ErrUncertain", err)
		}
		if got := seen.WaitOrTimeout(); got["tenant"] != "acme" {
			t.Fatalf("Options.Reconcile saw headers %v, want the task's %v", got, headers)
		}
	})
}
