package pgfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"

	"github.com/fencedq/fencedq/jobs"
)

// auditingMiddleware writes the jobs (next) and then fails on its own, as
// a middleware whose audit record could not be written after the enqueue:
// for queue "audited", it returns next's results with an error.
func auditingMiddleware(next jobs.EnqueueFunc) jobs.EnqueueFunc {
	return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
		res, err := next(ctx, reqs)
		for _, r := range reqs {
			if err == nil && r.Queue == "audited" {
				return res, errors.New("audit log unavailable")
			}
		}
		return res, err
	}
}

// TestOutboxRelayOfAJobWrittenDespiteAnError: a row whose job the client
// wrote (its result returned) is relayed, whatever error the enqueue
// middleware returns beside it: setting it aside would list, count and
// alert on a row "that cannot be enqueued" whose job is in the queue and
// runs (and Retry would set it aside again).
func TestOutboxRelayOfAJobWrittenDespiteAnError(t *testing.T) {
	e, _ := newMiddlewareOutboxEnv(t, auditingMiddleware)
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "good-1"}},
			{Args: orderArgs{Order: "audited"}, Options: []jobs.Option{jobs.Queue("audited")}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	n, aside, err := e.outbox.Relay(ctx, e.client, 10, 100)
	if n != 2 || aside != 0 || err != nil {
		t.Errorf("relay: %d relayed, %d set aside, %v; want both rows relayed (their jobs were written)", n, aside, err)
	}
	for _, op := range ops {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("row %s: %v", op, err)
		}
	}
	if failed, err := e.outbox.Failed(ctx, 10); len(failed) != 0 || err != nil || e.rows(t) != 0 {
		t.Fatalf("set aside %+v (%v), %d rows left; want none: every job was written", failed, err, e.rows(t))
	}
}

// TestOutboxRelayOfAJobWrittenDespiteAnErrorOneAtATime: so does a row
// enqueued on its own after its batch was refused for another row's sake.
func TestOutboxRelayOfAJobWrittenDespiteAnErrorOneAtATime(t *testing.T) {
	flaky := false
	e, _ := newMiddlewareOutboxEnv(t, func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return refusingMiddleware(&flaky)(auditingMiddleware(next))
	})
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "amended"}, Options: []jobs.Option{jobs.Queue("amended")}},
			{Args: orderArgs{Order: "audited"}, Options: []jobs.Option{jobs.Queue("audited")}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if n, aside, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 1 || aside != 1 || err != nil {
		t.Errorf("relay: %d relayed, %d set aside, %v; want the written row relayed, the refused one set aside", n, aside, err)
	}
	if _, err := e.ledger.FindByOperation(ctx, ops[1]); err != nil {
		t.Errorf("row %s: %v", ops[1], err)
	}
	failed, err := e.outbox.Failed(ctx, 10)
	if err != nil || len(failed) != 1 || pgfence.OutboxOperationPrefix+failed[0].ID != ops[0] {
		t.Fatalf("set aside %+v (%v); want only the refused row %s", failed, err, ops[0])
	}
}
