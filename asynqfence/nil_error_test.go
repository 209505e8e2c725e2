package asynqfence_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/jobs"
)

// lookupError is an error type whose Error method reads its receiver.
type lookupError struct{ key string }

func (e *lookupError) Error() string { return "no such key " + e.key }

// TestNilPointerErrorIsAPanic: a handler that returns a nil pointer of an
// error type whose Error method dereferences it has its attempt committed
// as a panic's, a retry, instead of the panic escaping the bridge with
// the job left running in the ledger until its lease expires.
func TestNilPointerErrorIsAPanic(t *testing.T) {
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("lookup", func(context.Context, *asynq.Task) error {
			var missing *lookupError
			return missing
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("lookup", []byte(`{}`)), asynq.TaskID("l1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); err == nil || !strings.Contains(err.Error(), "handler panicked") {
		t.Fatalf("the bridge returned %v to asynq, want the handler's panic", err)
	}
	if rec := p.record("l1"); rec.State != jobs.Pending || rec.Attempts != 1 || !strings.Contains(rec.Error, "handler panicked") {
		t.Fatalf("after the attempt the job is %s after %d attempts, error %q: want a retry", rec.State, rec.Attempts, rec.Error)
	}
}
