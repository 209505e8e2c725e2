package pgfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
)

// A backend terminated in the middle of a fenced transaction (a server
// restart, an operator's pg_terminate_backend) leaves nothing behind: the
// call fails, the mark, the effect log and fn's writes are as before, the
// operation id is free, and a retry applies it once.
func TestBackendTerminatedMidTransactionWritesNothing(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	if err := s.Apply(ctx, f("acct:1", 10, "a", "op-0"), write("acct:1", 10, 1)); err != nil {
		t.Fatal(err)
	}
	terminate := func(ctx context.Context, tx pgx.Tx) error {
		var pid uint32
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO counters VALUES ('acct:1', 100)
			ON CONFLICT (resource) DO UPDATE SET n = counters.n + 100`); err != nil {
			return err
		}
		var ok bool
		if err := pool.QueryRow(context.WithoutCancel(ctx), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Errorf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO counters VALUES ('acct:2', 1)`)
		return err
	}
	for name, apply := range map[string]func() error{
		"Apply": func() error { return s.Apply(ctx, f("acct:1", 20, "b", "op-1"), terminate) },
		"FenceTx": func() error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := s.FenceTx(ctx, tx, f("acct:1", 20, "b", "op-1")); err != nil {
					return err
				}
				return terminate(ctx, tx)
			})
		},
	} {
		if err := apply(); err == nil || errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrAlreadyApplied) {
			t.Fatalf("%s with its backend terminated: %v, want a connection error", name, err)
		}
		wantHighWater(t, s, "acct:1", 10, "a")
		if n, err := value(ctx, pool, "acct:1"); err != nil || n != 1 {
			t.Fatalf("%s: counter %d (%v), want 1", name, n, err)
		}
		if _, ok, err := s.Applied(ctx, "op-1"); err != nil || ok {
			t.Fatalf("%s: Applied(op-1) = %v, %v; want not applied", name, ok, err)
		}
	}
	if err := s.Apply(ctx, f("acct:1", 20, "b", "op-1"), write("acct:1", 20, 1)); err != nil {
		t.Fatalf("retry after the terminated backends: %v", err)
	}
	if n, err := value(ctx, pool, "acct:1"); err != nil || n != 2 {
		t.Fatalf("counter after the retry %d (%v), want 2", n, err)
	}
	wantHighWater(t, s, "acct:1", 20, "b")
}
