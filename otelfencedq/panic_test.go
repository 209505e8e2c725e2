package otelfencedq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

// TestPanicWithAFenceErrorRecordsItsClass: a handler that panics with what
// protected storage refused it with (a must-style helper's panic(err))
// gets an attempt span that records the error's class, as for a returned
// error, not the resource and owner it names; the attempt is retried.
func TestPanicWithAFenceErrorRecordsItsClass(t *testing.T) {
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[transfer](func(ctx context.Context, j *jobs.Job[transfer]) error {
			if j.Attempt == 1 {
				f, _ := fence.FromContext(ctx)
				panic(fmt.Errorf("debit: %w", &fence.StaleError{Fence: f, StoredToken: f.Token + 1, StoredOwner: "other-worker/job-9"}))
			}
			return nil
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), transfer{From: "alice@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	attempts := tr.spans("attempt transfer")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	s := attempts[0]
	if got := attr(s, otelfencedq.AttrOutcome).AsString(); got != worker.OutcomeRetry {
		t.Errorf("outcome %q, want %q", got, worker.OutcomeRetry)
	}
	var messages []string
	for _, e := range s.Events {
		for _, kv := range e.Attributes {
			v := kv.Value.String()
			if strings.Contains(v, "alice@") || strings.Contains(v, "other-worker") {
				t.Errorf("the span records %s = %q: a resource or an owner", kv.Key, v)
			}
			if kv.Key == "exception.message" {
				messages = append(messages, v)
			}
		}
	}
	want := "handler panicked: debit: " + fence.ErrStale.Error()
	if len(messages) != 1 || messages[0] != want {
		t.Fatalf("recorded errors %q, want [%q]", messages, want)
	}
}
