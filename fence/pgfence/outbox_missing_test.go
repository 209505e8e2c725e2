package pgfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestNotMigratedSaysRunMigrate: on a database never migrated (a fresh
// schema), and under Options naming a schema that does not exist, every
// Store and Outbox call fails with an error matching pgfence.ErrNotMigrated
// that names pgfence.Migrate, instead of a bare "relation does not exist".
func TestNotMigratedSaysRunMigrate(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for _, opts := range []pgfence.Options{{}, {Schema: "never_migrated"}} {
		s, err := pgfence.New(pool, opts)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := pgfence.NewOutbox(pool, opts)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, enqErr := ob.Enqueue(ctx, tx, orderArgs{Order: "o"})
		_ = tx.Rollback(ctx)
		tx, err = pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fenceTxErr := s.FenceTx(ctx, tx, f("r", 2, "o", "op-tx"))
		_ = tx.Rollback(ctx)
		_, _, relayErr := ob.Relay(ctx, client, 10, 100)
		_, failedErr := ob.Failed(ctx, 10)
		_, retryErr := ob.Retry(ctx)
		_, _, appliedErr := s.Applied(ctx, "op")
		_, _, highErr := s.HighWater(ctx, "r")
		_, pruneErr := s.PruneEffects(ctx, pgfence.DefaultEffectRetention)
		ran := false
		for name, err := range map[string]error{
			"Outbox.Enqueue": enqErr, "Outbox.Relay": relayErr, "Outbox.Failed": failedErr, "Outbox.Retry": retryErr,
			"Apply":          s.Apply(ctx, f("r", 1, "o", "op"), func(context.Context, pgx.Tx) error { ran = true; return nil }),
			"ApplyBatch":     s.ApplyBatch(ctx, f("r", 1, "o", "op"), batchWrite("r", 1, 1)),
			"FenceTx":        fenceTxErr,
			"FenceOnAcquire": s.FenceOnAcquire(ctx, fence.Fence{Resource: "r", Token: 1, Owner: "o"}),
			"Applied":        appliedErr, "HighWater": highErr, "PruneEffects": pruneErr,
		} {
			if !errors.Is(err, pgfence.ErrNotMigrated) || !strings.Contains(err.Error(), "run pgfence.Migrate") {
				t.Errorf("schema %q: %s: %v, want ErrNotMigrated naming pgfence.Migrate", opts.Schema, name, err)
			}
		}
		if ran {
			t.Errorf("schema %q: Apply ran its function without the tables", opts.Schema)
		}
	}
	// A missing table of the caller's own statements is the caller's.
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("INSERT INTO callers_missing_table VALUES (1)")
	if err := s.ApplyBatch(ctx, f("r", 1, "o", "op-user"), b); err == nil || errors.Is(err, pgfence.ErrNotMigrated) {
		t.Errorf("ApplyBatch with the caller's missing table: %v, want an error not matching ErrNotMigrated", err)
	}
	if err := s.Apply(ctx, f("r", 2, "o", "op-user-2"), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO callers_missing_table VALUES (1)")
		return err
	}); err == nil || errors.Is(err, pgfence.ErrNotMigrated) {
		t.Errorf("Apply with the caller's missing table: %v, want an error not matching ErrNotMigrated", err)
	}
}
