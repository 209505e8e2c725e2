package pgfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// panickingMiddleware panics on jobs of queue "panics" (a nil map read on
// a header some rows lack, say).
func panickingMiddleware(next jobs.EnqueueFunc) jobs.EnqueueFunc {
	return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
		for _, r := range reqs {
			if r.Queue == "panics" {
				panic("tenant table missing")
			}
		}
		return next(ctx, reqs)
	}
}

// TestOutboxRelayMiddlewarePanicsOnOneRow: an enqueue middleware that
// panics on one row neither escapes Relay (a pool's leader took every
// pass for a failure) nor holds back the rows beside it and after it for
// good (the same oldest batch, taken again at each pass, panicked again):
// the row is set aside saying the enqueue panicked, the others relayed.
func TestOutboxRelayMiddlewarePanicsOnOneRow(t *testing.T) {
	e, _ := newMiddlewareOutboxEnv(t, panickingMiddleware)
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "good-1"}},
			{Args: orderArgs{Order: "panics"}, Options: []jobs.Option{jobs.Queue("panics")}},
			{Args: orderArgs{Order: "good-2"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	var n, aside int
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = errors.New("Relay panicked")
			}
		}()
		n, aside, err = e.outbox.Relay(ctx, e.client, 10, 100)
	}()
	if n != 2 || aside != 1 || err != nil {
		t.Fatalf("relay: %d relayed, %d set aside, %v; want 2 relayed and the panicking row set aside", n, aside, err)
	}
	for _, op := range []string{ops[0], ops[2]} {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("row %s held back by a panicking one: %v", op, err)
		}
	}
	failed, err := e.outbox.Failed(ctx, 10)
	if err != nil || len(failed) != 1 || pgfence.OutboxOperationPrefix+failed[0].ID != ops[1] || !strings.Contains(failed[0].Error, "panicked") {
		t.Fatalf("set aside %+v (%v); want row %s, its error saying the enqueue panicked", failed, err, ops[1])
	}
}
