package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/internal/fencetest"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/lease"
)

// setup migrates a fresh schema and adds the suite's data tables.
func setup(t *testing.T) (*pgxpool.Pool, *pgfence.Store) {
	t.Helper()
	pool := pgtest.New(t)
	ctx := t.Context()
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `
		CREATE TABLE counters (resource text PRIMARY KEY, n bigint NOT NULL);
		CREATE TABLE acceptance_log (id bigserial PRIMARY KEY, resource text NOT NULL, token numeric(20,0) NOT NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, s
}

// write is the suite's fenced write: bump a counter and log the token. The
// log's serial id is taken while the resource's high-water row is locked,
// so id order is acceptance order.
func write(resource string, tok lease.Token, delta int64) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO counters VALUES ($1, $2)
			ON CONFLICT (resource) DO UPDATE SET n = counters.n + EXCLUDED.n`, resource, delta); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO acceptance_log (resource, token) VALUES ($1, $2::text::numeric)`, resource, tok.String())
		return err
	}
}

func value(ctx context.Context, pool *pgxpool.Pool, resource string) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, `SELECT COALESCE((SELECT n FROM counters WHERE resource = $1), 0)`, resource).Scan(&n)
	return n, err
}

func logOf(ctx context.Context, pool *pgxpool.Pool, resource string) ([]lease.Token, error) {
	rows, err := pool.Query(ctx, `SELECT token::text FROM acceptance_log WHERE resource = $1 ORDER BY id`, resource)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (lease.Token, error) {
		var s string
		if err := r.Scan(&s); err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(s, 10, 64)
		return lease.Token(v), err
	})
}

// harnessOver is the contract suite's harness over pool and s, with the
// suite's writes made by apply.
func harnessOver(pool *pgxpool.Pool, s *pgfence.Store, apply func(ctx context.Context, f fence.Fence, delta int64) error) fencetest.Harness {
	return fencetest.Harness{
		Apply:          apply,
		Value:          func(ctx context.Context, resource string) (int64, error) { return value(ctx, pool, resource) },
		Log:            func(ctx context.Context, resource string) ([]lease.Token, error) { return logOf(ctx, pool, resource) },
		FenceOnAcquire: s.FenceOnAcquire,
		HighWater:      s.HighWater,
		Applied:        s.Applied,
		Count: func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fencedq_fences) + (SELECT count(*) FROM fencedq_effects)
				+ (SELECT count(*) FROM counters) + (SELECT count(*) FROM acceptance_log)`).Scan(&n)
			return n, err
		},
	}
}

// applyHarness is the contract suite's harness with writes through Apply.
func applyHarness(pool *pgxpool.Pool, s *pgfence.Store) fencetest.Harness {
	return harnessOver(pool, s, func(ctx context.Context, f fence.Fence, delta int64) error {
		return s.Apply(ctx, f, write(f.Resource, f.Token, delta))
	})
}

func harness(t *testing.T) fencetest.Harness { return applyHarness(setup(t)) }

func TestContract(t *testing.T) { fencetest.Run(t, harness) }

func f(resource string, tok lease.Token, owner, op string) fence.Fence {
	return fence.Fence{Resource: resource, Token: tok, Owner: owner, OperationID: op}
}

func TestFnErrorRollsBack(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	boom := errors.New("boom")
	err := s.Apply(ctx, f("acct:1", 10, "a", "op-1"), func(ctx context.Context, tx pgx.Tx) error {
		if err := write("acct:1", 10, 5)(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fn's error", err)
	}
	if tok, _, _ := s.HighWater(ctx, "acct:1"); tok != 0 {
		t.Fatalf("high-water raised by a failed fn: %d", tok)
	}
	if _, ok, _ := s.Applied(ctx, "op-1"); ok {
		t.Fatal("failed fn's operation recorded as applied")
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 0 {
		t.Fatalf("failed fn's write kept: %d", n)
	}
	// The operation can be retried and then applies.
	if err := s.Apply(ctx, f("acct:1", 10, "a", "op-1"), write("acct:1", 10, 5)); err != nil {
		t.Fatal(err)
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 5 {
		t.Fatalf("retry: value %d, want 5", n)
	}
}

func TestApplyMulti(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	transfer := func(from, to string, amount int64) func(ctx context.Context, tx pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			if err := write(from, 1, -amount)(ctx, tx); err != nil {
				return err
			}
			return write(to, 1, amount)(ctx, tx)
		}
	}
	fs := []fence.Fence{f("acct:b", 10, "w", "tx-1"), f("acct:a", 20, "w", "tx-1")}
	if err := s.ApplyMulti(ctx, fs, transfer("acct:b", "acct:a", 30)); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := s.Applied(ctx, "tx-1")
	if err != nil || !ok || rec.Resource != "acct:b" || rec.Token != 10 {
		t.Fatalf("Applied(tx-1) = %+v, %v, %v; want primary resource acct:b token 10", rec, ok, err)
	}
	// Stale on one resource: nothing changes on either.
	err = s.ApplyMulti(ctx, []fence.Fence{f("acct:a", 25, "w", "tx-2"), f("acct:b", 9, "old", "tx-2")},
		transfer("acct:a", "acct:b", 1))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Fence.Resource != "acct:b" || se.StoredToken != 10 {
		t.Fatalf("err = %v, want stale on acct:b", err)
	}
	if tok, _, _ := s.HighWater(ctx, "acct:a"); tok != 20 {
		t.Fatalf("acct:a high-water %d after a rejected multi-fence, want 20", tok)
	}
	a, _ := value(ctx, pool, "acct:a")
	b, _ := value(ctx, pool, "acct:b")
	if a != 30 || b != -30 {
		t.Fatalf("balances a=%d b=%d, want 30 and -30", a, b)
	}
	// Invalid combinations.
	for _, bad := range [][]fence.Fence{
		nil,
		{f("acct:a", 30, "w", "tx-3"), f("acct:b", 30, "w", "tx-4")},
		{f("acct:a", 30, "w", "tx-3"), f("acct:a", 31, "w", "tx-3")},
		{f("acct:a", 30, "w", "tx-3"), f("acct:b", 0, "w", "tx-3")},
	} {
		if err := s.ApplyMulti(ctx, bad, nil); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("ApplyMulti(%v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// Transfers in opposite directions over the same two accounts, all at once:
// sorted locking means none deadlocks (PostgreSQL would abort one with
// 40P01 otherwise).
func TestApplyMultiNoDeadlock(t *testing.T) {
	_, s := setup(t)
	ctx := t.Context()
	const n = 40
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			x, y := "acct:x", "acct:y"
			if i%2 == 1 {
				x, y = y, x
			}
			op := fmt.Sprintf("t-%d", i)
			fs := []fence.Fence{f(x, 5, "w", op), f(y, 5, "w", op)}
			errs <- s.ApplyMulti(ctx, fs, func(ctx context.Context, tx pgx.Tx) error {
				if err := write(x, 5, -1)(ctx, tx); err != nil {
					return err
				}
				time.Sleep(time.Millisecond) // widen the window between the two writes
				return write(y, 5, 1)(ctx, tx)
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("transfer: %v", err)
		}
	}
}

func TestFenceTxInCallerTransaction(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FenceTx(ctx, tx, f("acct:1", 3, "a", "op-1")); err != nil {
		t.Fatal(err)
	}
	if err := write("acct:1", 3, 1)(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// Not visible before commit.
	if _, ok, _ := s.Applied(ctx, "op-1"); ok {
		t.Fatal("uncommitted operation visible")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Applied(ctx, "op-1"); !ok {
		t.Fatal("committed operation not applied")
	}
	if err := s.FenceTx(ctx, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("FenceTx without fences = %v, want ErrInvalid", err)
	}
}

func TestGuardRunsInTransaction(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	run := func(fail bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			tx, ok := pgfence.TxFromContext(ctx)
			if !ok {
				return errors.New("no tx in context")
			}
			if got, _ := fence.FromContext(ctx); got.Resource != "" {
				return errors.New("Guard should not set the fence itself")
			}
			if err := write("acct:1", 4, 1)(ctx, tx); err != nil {
				return err
			}
			if fail {
				return errors.New("handler failed")
			}
			return nil
		}
	}
	if err := s.Guard(ctx, f("acct:1", 4, "a", "op-1"), run(true)); err == nil {
		t.Fatal("want the callback's error")
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 0 {
		t.Fatalf("failed callback's write kept: %d", n)
	}
	if err := s.Guard(ctx, f("acct:1", 4, "a", "op-1"), run(false)); err != nil {
		t.Fatal(err)
	}
	if err := s.Guard(ctx, f("acct:1", 4, "a", "op-1"), run(false)); !errors.Is(err, fence.ErrAlreadyApplied) {
		t.Fatalf("second Guard = %v, want ErrAlreadyApplied", err)
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 1 {
		t.Fatalf("value %d, want 1", n)
	}
}

func TestMigrateConcurrentAndOptions(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	schema := pgtest.SchemaName(t) // a second schema, created by Migrate
	opts := pgfence.Options{Schema: schema, TablePrefix: "app_"}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 10 {
		wg.Go(func() { errs <- pgfence.Migrate(ctx, pool, opts) })
		wg.Go(func() { errs <- pgfence.Migrate(ctx, pool, pgfence.Options{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	s, err := pgfence.New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	if fn, en := s.Tables(); fn != `"`+schema+`"."app_fences"` || en != `"`+schema+`"."app_effects"` {
		t.Fatalf("Tables() = %s, %s", fn, en)
	}
	if err := s.Apply(ctx, f("r", 1, "o", "op"), nil); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.app_effects`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("effects in the configured table: %d, %v", n, err)
	}
	for _, bad := range []pgfence.Options{
		{Schema: `x"; DROP TABLE y; --`}, {TablePrefix: "a b"}, {Schema: "1abc"}, {TablePrefix: string(make([]byte, 41))},
	} {
		if _, err := pgfence.New(pool, bad); !errors.Is(err, pgfence.ErrOptions) {
			t.Errorf("New(%+v) = %v, want ErrOptions", bad, err)
		}
		if err := pgfence.Migrate(ctx, pool, bad); !errors.Is(err, pgfence.ErrOptions) {
			t.Errorf("Migrate(%+v) = %v, want ErrOptions", bad, err)
		}
	}
}

func TestPruneEffects(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	for i := range 3 {
		if err := s.Apply(ctx, f("r", 1, "o", fmt.Sprint("op-", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE fencedq_effects SET applied_at = now() - interval '8 days' WHERE operation_id <> 'op-2'`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneEffects(ctx, 7*24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("PruneEffects = %d, %v; want 2", n, err)
	}
	if _, ok, _ := s.Applied(ctx, "op-2"); !ok {
		t.Fatal("recent record pruned")
	}
	if _, err := s.PruneEffects(ctx, 0); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("PruneEffects(0) = %v, want ErrInvalid", err)
	}
}

// TestPruneEffectsInBatches: a backlog larger than one batch is removed
// batch by batch in one call; recent records stay and still answer
// Applied; a pruned operation id is no longer known (the retention rule
// PruneEffects documents); the pruning index exists.
func TestPruneEffectsInBatches(t *testing.T) {
	defer pgfence.SetPruneBatch(3)()
	pool, s := setup(t)
	ctx := t.Context()
	for i := range 10 {
		if err := s.Apply(ctx, f("r", lease.Token(i+1), "o", fmt.Sprint("op-", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, effects := s.Tables()
	if _, err := pool.Exec(ctx, `UPDATE `+effects+` SET applied_at = now() - interval '31 days' WHERE operation_id NOT IN ('op-8', 'op-9')`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneEffects(ctx, pgfence.DefaultEffectRetention)
	if err != nil || n != 8 {
		t.Fatalf("PruneEffects = %d, %v; want 8 (three batches of at most 3)", n, err)
	}
	for op, want := range map[string]bool{"op-0": false, "op-7": false, "op-8": true, "op-9": true} {
		if _, ok, err := s.Applied(ctx, op); ok != want || err != nil {
			t.Errorf("Applied(%s) = %v, %v; want %v", op, ok, err, want)
		}
	}
	if n, err := s.PruneEffects(ctx, pgfence.DefaultEffectRetention); n != 0 || err != nil {
		t.Fatalf("second PruneEffects = %d, %v", n, err)
	}
	var idx bool // resolved on the test's search path, like the tables
	if err := pool.QueryRow(ctx, `SELECT to_regclass('fencedq_effects_applied_at_idx') IS NOT NULL`).Scan(&idx); err != nil || !idx {
		t.Fatalf("pruning index: %v, %v", idx, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PruneEffects(cctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("PruneEffects with an ended context: %v", err)
	}
}

func TestInvalidFenceTouchesNoDatabase(t *testing.T) {
	// A pool that cannot connect: validation must fail before any I/O.
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	called := false
	err = s.Apply(t.Context(), f("r", 0, "o", "op"), func(context.Context, pgx.Tx) error { called = true; return nil })
	if !errors.Is(err, fence.ErrInvalid) || called {
		t.Fatalf("Apply(zero token) = %v (fn called %v), want ErrInvalid without I/O", err, called)
	}
}

// TestMigrateSkipsLockWhenMigrated: the migration lock is global to the
// database, and its holder may be a worker paused mid-start; Migrate on
// migrated tables must not queue behind it.
func TestMigrateSkipsLockWhenMigrated(t *testing.T) {
	pool, _ := setup(t)
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pgfence.MigrateLockID); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pgfence.Migrate(mctx, pool, pgfence.Options{}); err != nil {
		t.Fatalf("Migrate of migrated tables while the lock is held: %v", err)
	}
}
