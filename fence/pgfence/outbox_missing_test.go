package pgfence_test

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxWithoutTableSaysMigrate: on a database never migrated, every
// outbox call fails saying the table does not exist and how to create it
// (not that an existing table is too old).
func TestOutboxWithoutTableSaysMigrate(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, enqErr := ob.Enqueue(ctx, tx, orderArgs{Order: "o"})
	_ = tx.Rollback(ctx)
	_, relayErr := ob.Relay(ctx, client, 10, 100)
	_, failedErr := ob.Failed(ctx, 10)
	_, retryErr := ob.Retry(ctx)
	for name, err := range map[string]error{"Enqueue": enqErr, "Relay": relayErr, "Failed": failedErr, "Retry": retryErr} {
		if err == nil || !strings.Contains(err.Error(), "no outbox table") || !strings.Contains(err.Error(), "run pgfence.Migrate") ||
			strings.Contains(err.Error(), "predates") {
			t.Errorf("%s: %v, want an error saying there is no outbox table and to run pgfence.Migrate", name, err)
		}
	}
}
