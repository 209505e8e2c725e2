package pgfence_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A relay Redis refuses to write (here a primary short of its
// min-replicas-to-write; a demoted primary refuses alike) sets no row
// aside: the enqueue fails with jobs.ErrWriteRefused, Relay returns it and
// every row stays for the next relay, which enqueues each once Redis
// takes writes again.
func TestOutboxRelayKeepsRowsWhileRedisRefusesWrites(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	e := newOutboxEnvOn(t, rdb, "")
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "a"}}, {Args: orderArgs{Order: "b"}}}); err != nil {
			t.Fatal(err)
		}
	})
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}

	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 100); !errors.Is(err, jobs.ErrWriteRefused) {
		t.Fatalf("relay to a Redis refusing writes: %v, want jobs.ErrWriteRefused", err)
	}
	if failed, err := e.outbox.Failed(ctx, 10); len(failed) != 0 || err != nil || e.rows(t) != 2 {
		t.Fatalf("after the refused relay: set aside %+v (%v), %d rows; want every row kept", failed, err, e.rows(t))
	}
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 2 || err != nil {
		t.Fatalf("relay once Redis takes writes: %d, %v", n, err)
	}
	if e.rows(t) != 0 || e.pending(t) != 2 {
		t.Fatalf("%d rows left, %d jobs pending; want 0 and 2", e.rows(t), e.pending(t))
	}
}
