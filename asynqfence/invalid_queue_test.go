package asynqfence_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestInvalidLedgerQueueIsNotRegistered: a delivery whose ledger queue
// breaks the names' rules (asynq accepts any queue name; Options.Queue may
// map it to anything) is refused with ErrInvalid and SkipRetry before
// anything is recorded: the queue registry, which pools, the maintenance
// leader, the dashboard and Redeliver read, never lists it.
func TestInvalidLedgerQueueIsNotRegistered(t *testing.T) {
	const bad = "tenant {7} queue"
	var runs atomic.Int32
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Queue: func(string) string { return bad }},
		func(mux *asynq.ServeMux) {
			mux.HandleFunc("note", func(context.Context, *asynq.Task) error { runs.Add(1); return nil })
		})
	if _, err := p.client.Enqueue(asynq.NewTask("note", []byte(`{}`)), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, jobs.ErrInvalid) || !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("delivery into queue %q: %v, want ErrInvalid and SkipRetry", bad, err)
	}
	if runs.Load() != 0 {
		t.Fatal("the handler ran")
	}
	qs, err := p.ledger.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(qs, bad) {
		t.Fatalf("queue registry %q lists the refused queue", qs)
	}
}
