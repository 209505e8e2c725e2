package pgfence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestOutboxKeepsEveryOption: a job written through the outbox is relayed
// with every option Enqueue honours (headers, partition key, concurrency
// and rate limits, fair group, uniqueness), not only those with a column
// of their own; a second unique job of the same args is deduplicated.
func TestOutboxKeepsEveryOption(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	opts := []jobs.Option{jobs.Header("tenant", "acme"), jobs.Limit("export:acme", 2), jobs.Rate("provider", 50, time.Second),
		jobs.Group("acme"), jobs.Unique(jobs.UniqueOpts{ByFields: []string{"order"}, ByPeriod: time.Hour})}
	var first, second, plain string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		if first, err = e.outbox.Enqueue(ctx, tx, orderArgs{Order: "o-1"}, opts...); err != nil {
			t.Fatal(err)
		}
		if plain, err = e.outbox.Enqueue(ctx, tx, orderArgs{Order: "o-2"}); err != nil {
			t.Fatal(err)
		}
	})
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		if second, err = e.outbox.Enqueue(ctx, tx, orderArgs{Order: "o-1", Card: "other"}, opts...); err != nil {
			t.Fatal(err)
		}
	})
	var withOptions int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.outbox.Table()+` WHERE options IS NOT NULL`).Scan(&withOptions); err != nil {
		t.Fatal(err)
	}
	if withOptions != 2 {
		t.Fatalf("%d rows with options, want 2 (a job without any keeps NULL)", withOptions)
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 3 || err != nil {
		t.Fatalf("relay: %d, %v", n, err)
	}
	rec, err := e.ledger.FindByOperation(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Headers["tenant"] != "acme" || rec.LimitKey != "export:acme" || rec.LimitMax != 2 ||
		rec.RateKey != "provider" || rec.RateMax != 50 || rec.RatePer != time.Second || rec.Group != "acme" || rec.UniqueKey == "" {
		t.Fatalf("relayed job lost options: headers %v limit %q/%d rate %q/%d/%v group %q unique %q",
			rec.Headers, rec.LimitKey, rec.LimitMax, rec.RateKey, rec.RateMax, rec.RatePer, rec.Group, rec.UniqueKey)
	}
	dup, err := e.ledger.FindByOperation(ctx, second)
	if err == nil && dup.ID != rec.ID {
		t.Fatalf("the second unique job (same order) became job %s, want a duplicate of %s", dup.ID, rec.ID)
	}
	if e.pending(t) != 2 {
		t.Fatalf("%d pending jobs, want 2 (the unique one and the plain one)", e.pending(t))
	}
	if p, err := e.ledger.FindByOperation(ctx, plain); err != nil || p.Group != "" || p.LimitKey != "" || len(p.Headers) != 0 {
		t.Fatalf("plain job %+v, %v", p, err)
	}
}

// TestOutboxOnATableBeforeMigration6: writers on a table that predates the
// options column fail with a hint to migrate, nothing written; rows
// written before the migration relay as they were.
func TestOutboxOnATableBeforeMigration6(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "before"}); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := e.pool.Exec(ctx, `ALTER TABLE `+e.outbox.Table()+` DROP COLUMN options;
		DELETE FROM fencedq_migrations WHERE version >= 6`); err != nil {
		t.Fatal(err)
	}
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.outbox.Enqueue(ctx, tx, orderArgs{Order: "after"})
	_ = tx.Rollback(ctx)
	if err == nil || !strings.Contains(err.Error(), "run pgfence.Migrate") {
		t.Fatalf("enqueue on an old table: %v, want a hint to run Migrate", err)
	}
	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 100); err == nil || !strings.Contains(err.Error(), "run pgfence.Migrate") {
		t.Fatalf("relay on an old table: %v, want a hint to run Migrate", err)
	}
	if err := pgfence.Migrate(ctx, e.pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 1 || err != nil {
		t.Fatalf("relay after migrating: %d, %v", n, err)
	}
	if e.pending(t) != 1 {
		t.Fatalf("%d jobs, want the row written before the migration", e.pending(t))
	}
}
