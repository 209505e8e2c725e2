package pgfence_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestPackageEnqueueMany: the package-level EnqueueMany writes into the
// default outbox (the tables of Options{}): a rolled-back batch leaves
// nothing to relay, a committed one is relayed whole, each job under the
// operation id returned for it, in the order given.
func TestPackageEnqueueMany(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	e.inTx(t, false, func(tx pgx.Tx) {
		ops, err := pgfence.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "r-1"}}, {Args: orderArgs{Order: "r-2"}}})
		if err != nil || len(ops) != 2 {
			t.Fatalf("enqueue: %v, %v", ops, err)
		}
	})
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 0 || err != nil || e.rows(t) != 0 {
		t.Fatalf("after a rollback: relayed %d (%v), %d rows", n, err, e.rows(t))
	}

	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		ops, err = pgfence.EnqueueMany(ctx, tx, []jobs.Params{
			{Args: orderArgs{Order: "c-1"}},
			{Args: orderArgs{Order: "c-2"}, Options: []jobs.Option{jobs.OperationID("confirm-c-2")}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if len(ops) != 2 || ops[1] != "confirm-c-2" || ops[0] == ops[1] {
		t.Fatalf("operation ids %q", ops)
	}
	if e.rows(t) != 2 {
		t.Fatalf("%d rows in the default outbox after the commit, want 2", e.rows(t))
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 2 || err != nil {
		t.Fatalf("relay after the commit: %d, %v", n, err)
	}
	if e.rows(t) != 0 || e.pending(t) != 2 {
		t.Fatalf("%d rows left, %d jobs pending", e.rows(t), e.pending(t))
	}
	for i, order := range []string{"c-1", "c-2"} {
		rec, err := e.ledger.FindByOperation(ctx, ops[i])
		if err != nil {
			t.Fatalf("job %d (%s): %v", i, ops[i], err)
		}
		if want := `{"order":"` + order + `"}`; rec.Kind != "send-confirmation" || string(rec.Payload) != want {
			t.Fatalf("job %d: kind %s payload %s, want %s", i, rec.Kind, rec.Payload, want)
		}
	}
}
