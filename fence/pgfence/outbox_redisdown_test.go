package pgfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxRelayWithRedisDownNamesTheRowsItKeeps: a relay while Redis is
// down sets nothing aside and fails with jobs.ErrNotSent naming the
// rows it keeps (the maintenance leader logs and counts the error), and
// the next relay, once Redis is back, enqueues each row once.
func TestOutboxRelayWithRedisDownNamesTheRowsItKeeps(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	e := newOutboxEnvOn(t, rdb, "")
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		if ops, err = e.outbox.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{Order: "a"}}, {Args: orderArgs{Order: "b"}}}); err != nil {
			t.Fatal(err)
		}
	})
	srv.Kill()
	n, aside, err := e.outbox.Relay(ctx, e.client, 10, 100)
	if n != 0 || aside != 0 || !errors.Is(err, jobs.ErrNotSent) {
		t.Fatalf("relay with Redis down: %d relayed, %d set aside, %v; want 0, 0 and ErrNotSent", n, aside, err)
	}
	for _, op := range ops {
		if id := strings.TrimPrefix(op, pgfence.OutboxOperationPrefix); !strings.Contains(err.Error(), id) {
			t.Errorf("relay error %q does not name kept row %s", err, id)
		}
	}
	if failed, err := e.outbox.Failed(ctx, 10); len(failed) != 0 || err != nil || e.rows(t) != 2 {
		t.Fatalf("after the failed relay: set aside %+v (%v), %d rows; want every row kept", failed, err, e.rows(t))
	}
	srv.Restart()
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 2 || err != nil {
		t.Fatalf("relay once Redis is back: %d, %v", n, err)
	}
	if e.rows(t) != 0 || e.pending(t) != 2 {
		t.Fatalf("%d rows left, %d jobs pending; want 0 and 2", e.rows(t), e.pending(t))
	}
}
