package pgfence_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A relay to a Redis out of memory (maxmemory reached under noeviction)
// sets no row aside: the enqueue fails with jobs.ErrOutOfMemory, Relay
// returns it and every row stays for the next relay, which enqueues each
// once Redis has memory again.
func TestOutboxRelayKeepsRowsWhileRedisIsOutOfMemory(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	e := newOutboxEnvOn(t, rdb, "")
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "a"}}, {Args: orderArgs{Order: "b"}}}); err != nil {
			t.Fatal(err)
		}
	})
	for i := range 64 {
		if err := rdb.Set(ctx, fmt.Sprintf("filler:%d", i), strings.Repeat("x", 64<<10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}

	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 100); !errors.Is(err, jobs.ErrOutOfMemory) {
		t.Fatalf("relay to a Redis out of memory: %v, want jobs.ErrOutOfMemory", err)
	}
	if failed, err := e.outbox.Failed(ctx, 10); len(failed) != 0 || err != nil || e.rows(t) != 2 {
		t.Fatalf("after the refused relay: set aside %+v (%v), %d rows; want every row kept", failed, err, e.rows(t))
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 2 || err != nil {
		t.Fatalf("relay once Redis has memory: %d, %v", n, err)
	}
	if e.rows(t) != 0 || e.pending(t) != 2 {
		t.Fatalf("%d rows left, %d jobs pending; want 0 and 2", e.rows(t), e.pending(t))
	}
}
