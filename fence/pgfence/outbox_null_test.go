package pgfence_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxRelaySetsAsideRowsWithNullColumns: an outbox whose NOT NULL
// constraints were dropped by hand may hold a row with NULL where the relay
// reads a value. Such a row is set aside, naming the column, and listed by
// Failed; it never fails the batch's read, which would keep every row
// behind it in the outbox.
func TestOutboxRelaySetsAsideRowsWithNullColumns(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	cols := []string{"kind", "queue", "payload", "sensitive", "max_retries", "timeout_ms"}
	for _, c := range cols {
		if _, err := e.pool.Exec(ctx, `ALTER TABLE `+e.outbox.Table()+` ALTER COLUMN `+c+` DROP NOT NULL`); err != nil {
			t.Fatal(err)
		}
	}
	poison := map[string]string{} // row id -> its NULL column
	var good []string
	for _, c := range cols {
		var ops []string
		e.inTx(t, true, func(tx pgx.Tx) {
			var err error
			ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "poison"}}, {Args: orderArgs{Order: "good"}}})
			if err != nil {
				t.Fatal(err)
			}
		})
		id := strings.TrimPrefix(ops[0], pgfence.OutboxOperationPrefix)
		if _, err := e.pool.Exec(ctx, `UPDATE `+e.outbox.Table()+` SET `+c+` = NULL WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		poison[id] = c
		good = append(good, ops[1])
	}
	n, aside, err := e.outbox.Relay(ctx, e.client, 10, 1000)
	if n != len(cols) || aside != len(cols) || err != nil {
		t.Fatalf("relay: %d relayed, %d set aside, %v; want %d and %d", n, aside, err, len(cols), len(cols))
	}
	for _, op := range good {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Errorf("good row %s not relayed: %v", op, err)
		}
	}
	failed, err := e.outbox.Failed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != len(cols) {
		t.Fatalf("%d rows set aside, want %d: %+v", len(failed), len(cols), failed)
	}
	for _, f := range failed {
		if c := poison[f.ID]; c == "" || !strings.Contains(f.Error, c+" is NULL") {
			t.Errorf("set aside %+v, want a reason saying %s is NULL", f, c)
		}
	}
}
