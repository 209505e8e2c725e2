package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/internal/fencetest"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// noCall is an Apply callback for writes that must be refused.
func noCall(t *testing.T) func(context.Context, pgx.Tx) error {
	return func(context.Context, pgx.Tx) error {
		t.Error("fn ran for a refused write")
		return nil
	}
}

func wantHighWater(t *testing.T, s *pgfence.Store, resource string, tok lease.Token, owner string) {
	t.Helper()
	got, gotOwner, err := s.HighWater(t.Context(), resource)
	if err != nil || got != tok || gotOwner != owner {
		t.Fatalf("HighWater(%s) = (%d, %q), %v; want (%d, %q)", resource, got, gotOwner, err, tok, owner)
	}
}

// TestStaleWriteOfAppliedOperation: an operation id applied by a newer
// token on the same resource, sent again with an older token, is refused
// as stale (the fence is checked before the effect log), naming the mark.
func TestStaleWriteOfAppliedOperation(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	if err := s.Apply(ctx, f("acct:1", 20, "b", "op-1"), write("acct:1", 20, 1)); err != nil {
		t.Fatal(err)
	}
	old := f("acct:1", 10, "a", "op-1")
	err := s.Apply(ctx, old, noCall(t))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.StoredToken != 20 || se.StoredOwner != "b" || se.Fence != old {
		t.Fatalf("stale write of an applied op id: err = %#v, want *StaleError against (20, b)", err)
	}
	if errors.Is(err, fence.ErrAlreadyApplied) {
		t.Fatalf("stale write reported as already applied: %v", err)
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 1 {
		t.Fatalf("value %d, want 1", n)
	}
	wantHighWater(t, s, "acct:1", 20, "b")
}

// TestApplyMultiVerdicts: with several fences, the first stale resource in
// sorted order is named with its mark, whatever the slice order; a stale
// fence wins over an applied operation id; an applied operation reports
// its primary record and the refused primary fence; refused writes leave
// every mark as it was.
func TestApplyMultiVerdicts(t *testing.T) {
	_, s := setup(t)
	ctx := t.Context()
	for _, m := range []fence.Fence{f("acct:a", 20, "w", ""), f("acct:b", 10, "w", ""), f("acct:c", 30, "x", "")} {
		if err := s.FenceOnAcquire(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// acct:c and acct:a stale, acct:b accepted: acct:a is named.
	err := s.ApplyMulti(ctx, []fence.Fence{f("acct:c", 5, "w", "m-1"), f("acct:b", 50, "w", "m-1"), f("acct:a", 5, "w", "m-1")}, noCall(t))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Fence != f("acct:a", 5, "w", "m-1") || se.StoredToken != 20 || se.StoredOwner != "w" {
		t.Fatalf("two stale resources: err = %#v, want *StaleError on acct:a against (20, w)", err)
	}
	wantHighWater(t, s, "acct:b", 10, "w") // raised inside the refused write, rolled back
	if _, ok, _ := s.Applied(ctx, "m-1"); ok {
		t.Fatal("refused m-1 recorded")
	}
	// Equal token from another owner is stale too.
	err = s.ApplyMulti(ctx, []fence.Fence{f("acct:b", 50, "w", "m-1"), f("acct:c", 30, "w", "m-1")}, noCall(t))
	if !errors.As(err, &se) || se.Fence.Resource != "acct:c" || se.StoredToken != 30 || se.StoredOwner != "x" {
		t.Fatalf("equal token of another owner: err = %#v, want *StaleError on acct:c against (30, x)", err)
	}

	if err := s.ApplyMulti(ctx, []fence.Fence{f("acct:b", 50, "w", "m-2"), f("acct:a", 25, "w", "m-2")}, nil); err != nil {
		t.Fatal(err)
	}
	wantHighWater(t, s, "acct:a", 25, "w")
	wantHighWater(t, s, "acct:b", 50, "w")
	again := []fence.Fence{f("acct:a", 25, "w", "m-2"), f("acct:b", 50, "w", "m-2")}
	err = s.ApplyMulti(ctx, again, noCall(t))
	var ae *fence.AlreadyAppliedError
	want := fence.Effect{OperationID: "m-2", Resource: "acct:b", Token: 50, Owner: "w"}
	if !errors.As(err, &ae) || ae.Record != want || ae.Fence != again[0] {
		t.Fatalf("applied operation: err = %#v, want record %+v and fence %+v", err, want, again[0])
	}
	// Stale on one resource and applied: stale.
	err = s.ApplyMulti(ctx, []fence.Fence{f("acct:b", 50, "w", "m-2"), f("acct:a", 24, "w", "m-2")}, noCall(t))
	if !errors.As(err, &se) || se.Fence.Resource != "acct:a" || se.StoredToken != 25 {
		t.Fatalf("stale and applied: err = %#v, want *StaleError on acct:a against 25", err)
	}
	wantHighWater(t, s, "acct:a", 25, "w")
	wantHighWater(t, s, "acct:b", 50, "w")
}

// waitBlockedBy waits until n backends wait on a lock held by the backend
// pid. PostgreSQL sends no notification when a backend starts waiting on a
// lock, and every wait a test could put beside it in the lock queue would
// wait for the holder's end instead, so this asks the lock table
// (pg_blocking_pids) until it says so, within testsignal.Timeout.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid uint32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testsignal.Timeout())
	defer cancel()
	var blocked int
	for blocked < n {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1::int = ANY (pg_blocking_pids(pid))`, int32(pid)).Scan(&blocked)
		if err != nil {
			t.Fatalf("waiting for %d writers blocked by backend %d (%d so far): %v", n, pid, blocked, err)
		}
	}
}

// holdFence begins a transaction that fences fs and keeps it open; it
// returns the transaction and its backend's pid.
func holdFence(t *testing.T, pool *pgxpool.Pool, s *pgfence.Store, fs ...fence.Fence) (pgx.Tx, uint32) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
	if err := s.FenceTx(ctx, tx, fs...); err != nil {
		t.Fatal(err)
	}
	return tx, tx.Conn().PgConn().PID()
}

// TestStaleErrorCarriesTheMarkThatRejected: a writer that queued on a
// resource's row behind a newer holder is refused with the mark that holder
// committed, not the one it saw before waiting; when the holder rolls back
// instead, the queued writer is accepted.
func TestStaleErrorCarriesTheMarkThatRejected(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	if err := s.FenceOnAcquire(ctx, f("acct:1", 5, "first", "")); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{true, false} {
		tx, pid := holdFence(t, pool, s, f("acct:1", 20, "newer", fmt.Sprint("op-newer-", commit)))
		mid := f("acct:1", 10, "mid", fmt.Sprint("op-mid-", commit))
		errc := make(chan error, 1)
		go func() { errc <- s.Apply(ctx, mid, write("acct:1", 10, 1)) }()
		waitBlockedBy(t, pool, pid, 1)
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err := <-errc
			var se *fence.StaleError
			if !errors.As(err, &se) || se.StoredToken != 20 || se.StoredOwner != "newer" || se.Fence != mid {
				t.Fatalf("queued behind a committed newer holder: err = %#v, want *StaleError against (20, newer)", err)
			}
			// Start the second round from a mark below mid's token.
			if _, err := pool.Exec(ctx, `UPDATE fencedq_fences SET token = 5, owner = 'first' WHERE resource = 'acct:1'`); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("queued behind a holder that rolled back: %v", err)
		}
		wantHighWater(t, s, "acct:1", 10, "mid")
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 1 {
		t.Fatalf("value %d, want 1", n)
	}
}

// TestConcurrentDuplicateWaitsForTheFirst: a write of an operation id that
// another transaction is applying waits for it; it applies if that one
// rolls back, and is reported already applied (with the first one's
// record) if it commits, on the same resource or another one.
func TestConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()

	tx, pid := holdFence(t, pool, s, f("acct:1", 10, "a", "op-1"))
	errc := make(chan error, 1)
	go func() { errc <- s.Apply(ctx, f("acct:1", 10, "a", "op-1"), write("acct:1", 10, 1)) }()
	waitBlockedBy(t, pool, pid, 1)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("duplicate of a rolled-back write: %v", err)
	}
	if rec, ok, err := s.Applied(ctx, "op-1"); err != nil || !ok || rec.Token != 10 || rec.Owner != "a" {
		t.Fatalf("Applied(op-1) = %+v, %v, %v", rec, ok, err)
	}

	first := f("acct:2", 7, "b", "op-2")
	tx, pid = holdFence(t, pool, s, first)
	if err := write("acct:2", 7, 1)(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// One duplicate queues on the effect log's row, the other on the
	// resource's row.
	dups := []fence.Fence{f("acct:3", 8, "c", "op-2"), f("acct:2", 7, "b", "op-2")}
	errs := make([]error, len(dups))
	var wg sync.WaitGroup
	for i, dup := range dups {
		wg.Go(func() { errs[i] = s.Apply(ctx, dup, noCall(t)) })
	}
	waitBlockedBy(t, pool, pid, len(dups))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want := fence.Effect{OperationID: "op-2", Resource: "acct:2", Token: 7, Owner: "b"}
	for i, err := range errs {
		var ae *fence.AlreadyAppliedError
		if !errors.As(err, &ae) || ae.Record != want || ae.Fence != dups[i] {
			t.Errorf("duplicate %+v of a committed write: err = %#v, want record %+v", dups[i], err, want)
		}
	}
	for r, n := range map[string]int64{"acct:1": 1, "acct:2": 1, "acct:3": 0} {
		if v, _ := value(ctx, pool, r); v != n {
			t.Errorf("value of %s = %d, want %d", r, v, n)
		}
	}
	wantHighWater(t, s, "acct:3", 0, "")
}

// TestApplyReturnsItsConnection: every outcome of Apply (applied, stale,
// already applied, fn's error, a failing fence statement) gives its
// connection back to the pool healthy, so a pool of one connection serves
// them all in turn without reconnecting.
func TestApplyReturnsItsConnection(t *testing.T) {
	base, _ := setup(t)
	pool, s := poolWith(t, base, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	missing, err := pgfence.New(pool, pgfence.Options{TablePrefix: "never_migrated_"})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	steps := []struct {
		name string
		run  func(ctx context.Context) error
		want func(error) bool
	}{
		{"applied", func(ctx context.Context) error {
			return s.Apply(ctx, f("acct:1", 10, "a", "op-1"), write("acct:1", 10, 1))
		}, func(err error) bool { return err == nil }},
		{"stale", func(ctx context.Context) error {
			return s.Apply(ctx, f("acct:1", 9, "a", "op-2"), noCall(t))
		}, func(err error) bool { return errors.Is(err, fence.ErrStale) }},
		{"already applied", func(ctx context.Context) error {
			return s.Apply(ctx, f("acct:1", 10, "a", "op-1"), noCall(t))
		}, func(err error) bool { return errors.Is(err, fence.ErrAlreadyApplied) }},
		{"fn error", func(ctx context.Context) error {
			return s.Apply(ctx, f("acct:1", 11, "a", "op-3"), func(context.Context, pgx.Tx) error { return boom })
		}, func(err error) bool { return errors.Is(err, boom) }},
		{"fence statement fails", func(ctx context.Context) error {
			return missing.Apply(ctx, f("acct:1", 12, "a", "op-4"), noCall(t))
		}, func(err error) bool {
			return err != nil && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrAlreadyApplied)
		}},
		{"fence on acquire, stale", func(ctx context.Context) error {
			return s.FenceOnAcquire(ctx, f("acct:1", 9, "b", ""))
		}, func(err error) bool { return errors.Is(err, fence.ErrStale) }},
		{"fence on acquire", func(ctx context.Context) error {
			return s.FenceOnAcquire(ctx, f("acct:1", 12, "b", ""))
		}, func(err error) bool { return err == nil }},
		{"applied again", func(ctx context.Context) error {
			return s.Apply(ctx, f("acct:1", 12, "b", "op-5"), write("acct:1", 12, 1))
		}, func(err error) bool { return err == nil }},
	}
	var conns int64
	for i, st := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := st.run(ctx)
		cancel()
		if !st.want(err) {
			t.Fatalf("%s: unexpected err %v", st.name, err)
		}
		stat := pool.Stat()
		if stat.AcquiredConns() != 0 {
			t.Fatalf("%s: %d connections still acquired", st.name, stat.AcquiredConns())
		}
		if i == 0 {
			conns = stat.NewConnsCount()
		} else if stat.NewConnsCount() != conns {
			t.Fatalf("%s: the pool reconnected (%d connections made, %d before)", st.name, stat.NewConnsCount(), conns)
		}
	}
	if n, _ := value(t.Context(), pool, "acct:1"); n != 2 {
		t.Fatalf("value %d, want 2", n)
	}
}

// roundTrips counts the round trips a pool's connections make: each query
// outside a batch and each batch is one.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestRoundTrips pins what a fenced write costs on the wire: the BEGIN and
// the fence's checks share one round trip, so Apply with one statement of
// its own makes three (the third is the COMMIT); FenceTx and
// FenceOnAcquire make one; a refused write reads the mark or the effect
// record, then rolls back.
func TestRoundTrips(t *testing.T) {
	base, _ := setup(t)
	rt := &roundTrips{}
	pool, s := poolWith(t, base, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1 // one connection, whose statements are prepared by the warm-up
		cfg.ConnConfig.Tracer = rt
	})
	ctx := t.Context()
	update := func(resource string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO counters VALUES ($1, 1)
				ON CONFLICT (resource) DO UPDATE SET n = counters.n + 1`, resource)
			return err
		}
	}
	fenceTx := func(ctx context.Context, fs ...fence.Fence) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		n := rt.n.Load()
		if err := s.FenceTx(ctx, tx, fs...); err != nil {
			return err
		}
		if got := rt.n.Load() - n; got != 1 {
			t.Errorf("FenceTx: %d round trips, want 1", got)
		}
		return tx.Commit(ctx)
	}
	// Every round fences its own resources and operations; the first one
	// prepares the statements on the connection.
	for round := range 2 {
		r := func(name string) string { return fmt.Sprintf("%d:%s", round, name) }
		fz := func(resource string, tok lease.Token, owner, op string) fence.Fence {
			return f(r(resource), tok, owner, r(op))
		}
		steps := []struct {
			name  string
			trips int64
			run   func() error
			want  func(error) bool
		}{
			{"Apply", 3, func() error { return s.Apply(ctx, fz("acct:1", 10, "a", "op-1"), update(r("acct:1"))) }, isNil},
			{"Apply without fn", 2, func() error { return s.Apply(ctx, fz("acct:1", 10, "a", "op-2"), nil) }, isNil},
			{"ApplyMulti", 3, func() error {
				return s.ApplyMulti(ctx, []fence.Fence{fz("acct:2", 10, "a", "op-3"), fz("acct:1", 10, "a", "op-3")}, update(r("acct:2")))
			}, isNil},
			{"Apply stale", 3, func() error { return s.Apply(ctx, fz("acct:1", 9, "a", "op-4"), update(r("acct:1"))) }, isStale},
			{"ApplyMulti stale", 3, func() error {
				return s.ApplyMulti(ctx, []fence.Fence{fz("acct:2", 11, "a", "op-5"), fz("acct:1", 9, "a", "op-5")}, update(r("acct:2")))
			}, isStale},
			{"Apply already applied", 3, func() error { return s.Apply(ctx, fz("acct:1", 10, "a", "op-1"), update(r("acct:1"))) }, isApplied},
			{"FenceOnAcquire", 1, func() error { return s.FenceOnAcquire(ctx, fz("acct:1", 20, "b", "")) }, isNil},
			{"FenceOnAcquire stale", 1, func() error { return s.FenceOnAcquire(ctx, fz("acct:1", 19, "b", "")) }, isStale},
			{"BEGIN, FenceTx, COMMIT", 3, func() error { return fenceTx(ctx, fz("acct:3", 1, "c", "op-6")) }, isNil},
		}
		for _, st := range steps {
			n := rt.n.Load()
			if err := st.run(); !st.want(err) {
				t.Fatalf("round %d, %s: unexpected err %v", round, st.name, err)
			}
			if got := rt.n.Load() - n; round == 1 && got != st.trips {
				t.Errorf("%s: %d round trips, want %d", st.name, got, st.trips)
			}
		}
	}
}

func isNil(err error) bool     { return err == nil }
func isStale(err error) bool   { return errors.Is(err, fence.ErrStale) }
func isApplied(err error) bool { return errors.Is(err, fence.ErrAlreadyApplied) }

// poolWithMode returns a pool over base's schema whose statements go out
// in mode.
func poolWithMode(t *testing.T, base *pgxpool.Pool, mode pgx.QueryExecMode) (*pgxpool.Pool, *pgfence.Store) {
	t.Helper()
	return poolWith(t, base, func(cfg *pgxpool.Config) { cfg.ConnConfig.DefaultQueryExecMode = mode })
}

// poolWith opens a pool over base's database with base's settings changed
// by set, and a Store over it; the pool closes when the test ends.
func poolWith(t *testing.T, base *pgxpool.Pool, set func(*pgxpool.Config)) (*pgxpool.Pool, *pgfence.Store) {
	t.Helper()
	cfg := base.Config().Copy()
	set(cfg)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, s
}

// execModes are the pgx modes other than the default statement cache: the
// simple protocol (as behind a transaction-pooling proxy) and unnamed
// statements.
var execModes = []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec}

// TestContractQueryExecModes runs the contract suite over pools in each of
// execModes.
func TestContractQueryExecModes(t *testing.T) {
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			fencetest.Run(t, func(t *testing.T) fencetest.Harness {
				base, _ := setup(t)
				return applyHarness(poolWithMode(t, base, mode))
			})
		})
	}
}

// TestApplyMultiQueryExecModes: several fences (sent as arrays) in each of
// execModes: accepted, stale, already applied.
func TestApplyMultiQueryExecModes(t *testing.T) {
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			base, _ := setup(t)
			_, s := poolWithMode(t, base, mode)
			ctx := t.Context()
			fs := []fence.Fence{f("acct:b", 1<<63+1, "w", "m-1"), f("acct:a", 20, "w", "m-1")}
			if err := s.ApplyMulti(ctx, fs, nil); err != nil {
				t.Fatal(err)
			}
			wantHighWater(t, s, "acct:b", 1<<63+1, "w")
			wantHighWater(t, s, "acct:a", 20, "w")
			err := s.ApplyMulti(ctx, []fence.Fence{f("acct:a", 21, "w", "m-2"), f("acct:b", 1<<63, "w", "m-2")}, noCall(t))
			var se *fence.StaleError
			if !errors.As(err, &se) || se.Fence.Resource != "acct:b" || se.StoredToken != 1<<63+1 {
				t.Fatalf("stale: err = %#v", err)
			}
			err = s.ApplyMulti(ctx, fs, noCall(t))
			var ae *fence.AlreadyAppliedError
			if !errors.As(err, &ae) || ae.Record.Resource != "acct:b" || ae.Record.Token != 1<<63+1 {
				t.Fatalf("applied: err = %#v", err)
			}
		})
	}
}
