package asynqfence_test

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestTypedWorkerSeesTheTasksHeaders: a fencedq worker run by the bridge
// (Handler) gets the asynq task's headers in Job.Headers, as a native
// pool gives it the job's (a tenant id, a trace context), as its own copy.
func TestTypedWorkerSeesTheTasksHeaders(t *testing.T) {
	var seen testsignal.Signal[map[string]string]
	seen.Init(t, "the worker's headers")
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		asynqfence.Handle(mux, jobs.Worker[transferArgs](jobs.WorkFunc[transferArgs](func(_ context.Context, j *jobs.Job[transferArgs]) error {
			seen.Signal(j.Headers)
			if j.Headers != nil {
				j.Headers["tenant"] = "changed" // its own copy: the task's stay
			}
			return nil
		})))
	})
	headers := map[string]string{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	task := asynq.NewTaskWithHeaders("transfer", []byte(`{"cents":250}`), headers)
	if _, err := p.client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	got := seen.WaitOrTimeout()
	if err := p.next(); err != nil {
		t.Fatal(err)
	}
	if got["tenant"] != "changed" || got["traceparent"] != headers["traceparent"] || headers["tenant"] != "acme" {
		t.Fatalf("the worker's headers %v, want the task's %v (its own copy)", got, headers)
	}
}
