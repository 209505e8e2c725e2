package asynqfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
)

// TestRetriesExhaustedSaysSo: a failed attempt past the task's retry limit
// makes the job dead; what the bridge returns to asynq (and logs) gives the
// ledger's reason, as the job's record does.
func TestRetriesExhaustedSaysSo(t *testing.T) {
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("flaky", func(context.Context, *asynq.Task) error { return errors.New("upstream 502") })
	})
	if _, err := p.client.Enqueue(asynq.NewTask("flaky", []byte(`{}`)), asynq.TaskID("f1"), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	err := p.next()
	if !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), "job dead (retries exhausted)") || !strings.Contains(err.Error(), "upstream 502") {
		t.Fatalf("returned %v; want the job dead, retries exhausted, with the handler's error", err)
	}
	if rec := p.record("f1"); rec.State != jobs.Dead || rec.Reason != "retries exhausted" {
		t.Fatalf("record %s, reason %q", rec.State, rec.Reason)
	}
}
