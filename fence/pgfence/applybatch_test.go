package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/internal/fencetest"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/lease"
)

// batchWrite is write as a batch: bump resource's counter by delta and
// log tok.
func batchWrite(resource string, tok lease.Token, delta int64) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO counters VALUES ($1, $2)
		ON CONFLICT (resource) DO UPDATE SET n = counters.n + EXCLUDED.n`, resource, delta)
	b.Queue(`INSERT INTO acceptance_log (resource, token) VALUES ($1, $2::text::numeric)`, resource, tok.String())
	return b
}

// noCallback is a batch whose only statement must not run and whose
// callback must not be called.
func noCallback(t *testing.T, resource string) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO counters VALUES ($1, 1000)`, resource).Exec(func(pgconn.CommandTag) error {
		t.Error("callback called for a refused write")
		return nil
	})
	return b
}

// batchHarness is the contract suite's harness with writes through
// ApplyBatch.
func batchHarness(pool *pgxpool.Pool, s *pgfence.Store) fencetest.Harness {
	return harnessOver(pool, s, func(ctx context.Context, f fence.Fence, delta int64) error {
		return s.ApplyBatch(ctx, f, batchWrite(f.Resource, f.Token, delta))
	})
}

// TestContractApplyBatch runs the contract suite with every write through
// ApplyBatch, over the default pool and over pools in each of execModes
// (the simple protocol sends the whole batch as one query string).
func TestContractApplyBatch(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		fencetest.Run(t, func(t *testing.T) fencetest.Harness { return batchHarness(setup(t)) })
	})
	for _, mode := range execModes {
		t.Run(mode.String(), func(t *testing.T) {
			fencetest.Run(t, func(t *testing.T) fencetest.Harness {
				base, _ := setup(t)
				return batchHarness(poolWithMode(t, base, mode))
			})
		})
	}
}

// TestApplyBatchOutcomes: an accepted batch runs every statement, in
// order, with its callbacks, raises the mark and records the effect; a
// stale one and an applied one change nothing and report exactly what
// Apply reports; a failing statement rolls back the statements before it
// and the effect record, and the operation applies later; a failing
// callback is reported with the commit. In each of the pgx modes.
func TestApplyBatchOutcomes(t *testing.T) {
	for _, mode := range append([]pgx.QueryExecMode{pgx.QueryExecModeCacheStatement}, execModes...) {
		t.Run(mode.String(), func(t *testing.T) {
			base, _ := setup(t)
			pool, s := poolWithMode(t, base, mode)
			ctx := t.Context()

			// Accepted: three statements, the last read through QueryRow.
			b := batchWrite("acct:1", 10, 5)
			var tags []string
			b.QueuedQueries[0].Exec(func(ct pgconn.CommandTag) error { tags = append(tags, ct.String()); return nil })
			b.QueuedQueries[1].Exec(func(ct pgconn.CommandTag) error { tags = append(tags, ct.String()); return nil })
			var n int64
			b.Queue(`UPDATE counters SET n = n * 2 WHERE resource = $1 RETURNING n`, "acct:1").QueryRow(func(r pgx.Row) error {
				return r.Scan(&n)
			})
			if err := s.ApplyBatch(ctx, f("acct:1", 10, "a", "op-1"), b); err != nil {
				t.Fatal(err)
			}
			if len(tags) != 2 || tags[0] != "INSERT 0 1" || tags[1] != "INSERT 0 1" || n != 10 {
				t.Fatalf("results: tags %q, n %d; want two INSERT 0 1 and 10", tags, n)
			}
			if v, _ := value(ctx, pool, "acct:1"); v != 10 {
				t.Fatalf("value %d, want 10", v)
			}
			wantHighWater(t, s, "acct:1", 10, "a")
			want := fence.Effect{OperationID: "op-1", Resource: "acct:1", Token: 10, Owner: "a"}
			if rec, ok, err := s.Applied(ctx, "op-1"); err != nil || !ok || rec != want {
				t.Fatalf("Applied(op-1) = %+v, %v, %v; want %+v", rec, ok, err, want)
			}

			// Stale, with an operation id never applied and one applied.
			if err := s.FenceOnAcquire(ctx, f("acct:1", 20, "b", "")); err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"op-2", "op-1"} {
				old := f("acct:1", 15, "a", op)
				err := s.ApplyBatch(ctx, old, noCallback(t, "acct:9"))
				var se *fence.StaleError
				if !errors.As(err, &se) || *se != (fence.StaleError{Fence: old, StoredToken: 20, StoredOwner: "b"}) {
					t.Fatalf("stale batch of %s: err = %#v, want *StaleError against (20, b)", op, err)
				}
				if errors.Is(err, fence.ErrAlreadyApplied) {
					t.Fatalf("stale batch reported already applied: %v", err)
				}
			}
			// Equal token of another owner.
			err := s.ApplyBatch(ctx, f("acct:1", 20, "c", "op-2"), noCallback(t, "acct:9"))
			var se *fence.StaleError
			if !errors.As(err, &se) || se.StoredToken != 20 || se.StoredOwner != "b" {
				t.Fatalf("equal token of another owner: err = %#v", err)
			}
			if _, ok, _ := s.Applied(ctx, "op-2"); ok {
				t.Fatal("stale op-2 recorded")
			}

			// Already applied, on the same resource and on another one.
			for _, again := range []fence.Fence{f("acct:1", 20, "b", "op-1"), f("acct:2", 3, "z", "op-1")} {
				err := s.ApplyBatch(ctx, again, noCallback(t, "acct:9"))
				var ae *fence.AlreadyAppliedError
				if !errors.As(err, &ae) || ae.Record != want || ae.Fence != again {
					t.Fatalf("applied op-1 again as %+v: err = %#v, want record %+v", again, err, want)
				}
			}
			wantHighWater(t, s, "acct:2", 0, "") // raised inside the refused write, rolled back
			wantHighWater(t, s, "acct:1", 20, "b")

			// A failing statement after a good one: nothing stays, the
			// callbacks of the good one ran, the failing one's got its error.
			b = batchWrite("acct:3", 30, 1)
			var ferr error
			b.Queue(`INSERT INTO counters VALUES ($1, 1 / 0)`, "acct:4").Exec(func(pgconn.CommandTag) error {
				t.Error("callback of the failing statement called with a tag")
				return nil
			})
			b.Queue(`INSERT INTO counters VALUES ('acct:5', 1)`)
			err = s.ApplyBatch(ctx, f("acct:3", 30, "c", "op-3"), b)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "22012" {
				t.Fatalf("failing statement: err = %#v (%v), want division_by_zero", err, ferr)
			}
			for _, r := range []string{"acct:3", "acct:4", "acct:5"} {
				if v, _ := value(ctx, pool, r); v != 0 {
					t.Fatalf("value of %s %d after a failed batch, want 0", r, v)
				}
			}
			wantHighWater(t, s, "acct:3", 0, "")
			if _, ok, _ := s.Applied(ctx, "op-3"); ok {
				t.Fatal("op-3 recorded by a failed batch")
			}
			if err := s.ApplyBatch(ctx, f("acct:3", 30, "c", "op-3"), batchWrite("acct:3", 30, 1)); err != nil {
				t.Fatalf("op-3 after its failed batch: %v", err)
			}
			if v, _ := value(ctx, pool, "acct:3"); v != 1 {
				t.Fatalf("value of acct:3 %d, want 1", v)
			}

			// A failing callback cannot veto: the write committed.
			boom := errors.New("boom")
			b = batchWrite("acct:6", 1, 1)
			b.QueuedQueries[0].Exec(func(pgconn.CommandTag) error { return boom })
			b.QueuedQueries[1].Exec(func(pgconn.CommandTag) error {
				t.Error("callback after a failed callback called")
				return nil
			})
			err = s.ApplyBatch(ctx, f("acct:6", 1, "d", "op-6"), b)
			if !errors.Is(err, boom) || !errors.Is(err, pgfence.ErrCommitted) {
				t.Fatalf("failing callback: err = %v, want boom and ErrCommitted", err)
			}
			if l, _ := logOf(ctx, pool, "acct:6"); len(l) != 1 {
				t.Fatalf("log of acct:6 %v, want the statement after the failed callback applied", l)
			}
			if err := s.ApplyBatch(ctx, f("acct:6", 1, "d", "op-6"), nil); !errors.Is(err, fence.ErrAlreadyApplied) {
				t.Fatalf("op-6 again: %v, want ErrAlreadyApplied", err)
			}

			// An empty batch fences and records alone.
			if err := s.ApplyBatch(ctx, f("acct:7", 7, "e", "op-7"), &pgx.Batch{}); err != nil {
				t.Fatal(err)
			}
			wantHighWater(t, s, "acct:7", 7, "e")
			if v, _ := value(ctx, pool, "acct:9"); v != 0 {
				t.Fatalf("a refused batch's statement applied: %d", v)
			}
		})
	}
}

// TestApplyMultiBatchVerdicts: ApplyMulti's verdicts through
// ApplyMultiBatch: the first stale resource in sorted order with its mark,
// marks raised inside a refused write rolled back, the primary record of
// an applied operation.
func TestApplyMultiBatchVerdicts(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	for _, m := range []fence.Fence{f("acct:a", 20, "w", ""), f("acct:b", 10, "w", ""), f("acct:c", 30, "x", "")} {
		if err := s.FenceOnAcquire(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	err := s.ApplyMultiBatch(ctx, []fence.Fence{f("acct:c", 5, "w", "m-1"), f("acct:b", 50, "w", "m-1"), f("acct:a", 5, "w", "m-1")}, noCallback(t, "x"))
	var se *fence.StaleError
	if !errors.As(err, &se) || *se != (fence.StaleError{Fence: f("acct:a", 5, "w", "m-1"), StoredToken: 20, StoredOwner: "w"}) {
		t.Fatalf("two stale resources: err = %#v, want *StaleError on acct:a against (20, w)", err)
	}
	err = s.ApplyMultiBatch(ctx, []fence.Fence{f("acct:b", 50, "w", "m-1"), f("acct:c", 30, "w", "m-1")}, noCallback(t, "x"))
	if !errors.As(err, &se) || se.Fence.Resource != "acct:c" || se.StoredToken != 30 || se.StoredOwner != "x" {
		t.Fatalf("equal token of another owner: err = %#v, want *StaleError on acct:c against (30, x)", err)
	}
	wantHighWater(t, s, "acct:b", 10, "w")
	if _, ok, _ := s.Applied(ctx, "m-1"); ok {
		t.Fatal("refused m-1 recorded")
	}

	transfer := func(from, to string, amount int64) *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO counters VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET n = counters.n + EXCLUDED.n`, from, -amount)
		b.Queue(`INSERT INTO counters VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET n = counters.n + EXCLUDED.n`, to, amount)
		return b
	}
	fs := []fence.Fence{f("acct:b", 50, "w", "m-2"), f("acct:a", 25, "w", "m-2")}
	if err := s.ApplyMultiBatch(ctx, fs, transfer("acct:b", "acct:a", 7)); err != nil {
		t.Fatal(err)
	}
	wantHighWater(t, s, "acct:a", 25, "w")
	wantHighWater(t, s, "acct:b", 50, "w")
	if a, _ := value(ctx, pool, "acct:a"); a != 7 {
		t.Fatalf("acct:a %d, want 7", a)
	}
	again := []fence.Fence{f("acct:a", 25, "w", "m-2"), f("acct:b", 50, "w", "m-2")}
	err = s.ApplyMultiBatch(ctx, again, transfer("acct:b", "acct:a", 7))
	var ae *fence.AlreadyAppliedError
	want := fence.Effect{OperationID: "m-2", Resource: "acct:b", Token: 50, Owner: "w"}
	if !errors.As(err, &ae) || ae.Record != want || ae.Fence != again[0] {
		t.Fatalf("applied operation: err = %#v, want record %+v and fence %+v", err, want, again[0])
	}
	err = s.ApplyMultiBatch(ctx, []fence.Fence{f("acct:b", 50, "w", "m-2"), f("acct:a", 24, "w", "m-2")}, nil)
	if !errors.As(err, &se) || se.Fence.Resource != "acct:a" || se.StoredToken != 25 {
		t.Fatalf("stale and applied: err = %#v, want *StaleError on acct:a against 25", err)
	}
	if a, _ := value(ctx, pool, "acct:a"); a != 7 {
		t.Fatalf("acct:a %d after refusals, want 7", a)
	}
	if err := s.ApplyMultiBatch(ctx, []fence.Fence{f("acct:a", 26, "w", "m-3"), f("acct:a", 26, "w", "m-3")}, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("resource fenced twice: %v, want ErrInvalid", err)
	}
}

// TestApplyBatchWaitsOnTheMark: a batch queued behind a newer holder of
// the resource's row is refused with the mark that holder committed (read
// under the lock, not before the wait), and accepted when the holder rolls
// back; a duplicate queued behind a transaction applying its operation id
// is refused with that transaction's record once it commits.
func TestApplyBatchWaitsOnTheMark(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	if err := s.FenceOnAcquire(ctx, f("acct:1", 5, "first", "")); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{true, false} {
		tx, pid := holdFence(t, pool, s, f("acct:1", 20, "newer", fmt.Sprint("op-newer-", commit)))
		mid := f("acct:1", 10, "mid", fmt.Sprint("op-mid-", commit))
		errc := make(chan error, 1)
		go func() { errc <- s.ApplyBatch(ctx, mid, batchWrite("acct:1", 10, 1)) }()
		waitBlockedBy(t, pool, pid, 1)
		if !commit {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("queued behind a holder that rolled back: %v", err)
			}
			wantHighWater(t, s, "acct:1", 10, "mid")
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		err := <-errc
		var se *fence.StaleError
		if !errors.As(err, &se) || *se != (fence.StaleError{Fence: mid, StoredToken: 20, StoredOwner: "newer"}) {
			t.Fatalf("queued behind a committed newer holder: err = %#v, want *StaleError against (20, newer)", err)
		}
		if _, err := pool.Exec(ctx, `UPDATE fencedq_fences SET token = 5, owner = 'first' WHERE resource = 'acct:1'`); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := value(ctx, pool, "acct:1"); n != 1 {
		t.Fatalf("value %d, want 1", n)
	}

	first := f("acct:2", 7, "b", "op-2")
	tx, pid := holdFence(t, pool, s, first)
	dup := f("acct:3", 8, "c", "op-2")
	errc := make(chan error, 1)
	go func() { errc <- s.ApplyBatch(ctx, dup, noCallback(t, "acct:3")) }()
	waitBlockedBy(t, pool, pid, 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var ae *fence.AlreadyAppliedError
	want := fence.Effect{OperationID: "op-2", Resource: "acct:2", Token: 7, Owner: "b"}
	if err := <-errc; !errors.As(err, &ae) || ae.Record != want || ae.Fence != dup {
		t.Fatalf("duplicate of a committed write: err = %#v, want record %+v", err, want)
	}
	wantHighWater(t, s, "acct:3", 0, "")
}

// TestApplyBatchRacesApply: an old lease holder and a new one write the
// same operation at once, one through Apply and the other through
// ApplyBatch (each way round). Exactly one applies, never both: either the
// new one (the old one is then stale, against the new mark) or the old one
// first (the new one then finds the operation applied); the resource's
// accepted tokens never decrease.
func TestApplyBatchRacesApply(t *testing.T) {
	pool, s := setup(t)
	ctx := t.Context()
	const rounds = 40
	var newWon, oldWon int
	for i := range rounds {
		r := fmt.Sprint("acct:", i)
		op := fmt.Sprint("op-", i)
		oldF, newF := f(r, 10, "old", op), f(r, 11, "new", op)
		batchFirst := i%2 == 0
		var oldErr, newErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		apply := func(f fence.Fence, batch bool, out *error) {
			<-start
			if batch {
				*out = s.ApplyBatch(ctx, f, batchWrite(f.Resource, f.Token, 1))
			} else {
				*out = s.Apply(ctx, f, write(f.Resource, f.Token, 1))
			}
		}
		wg.Go(func() { apply(oldF, batchFirst, &oldErr) })
		wg.Go(func() { apply(newF, !batchFirst, &newErr) })
		close(start)
		wg.Wait()
		log, err := logOf(ctx, pool, r)
		if err != nil {
			t.Fatal(err)
		}
		var se *fence.StaleError
		var ae *fence.AlreadyAppliedError
		switch {
		case newErr == nil && errors.As(oldErr, &se):
			newWon++
			if *se != (fence.StaleError{Fence: oldF, StoredToken: 11, StoredOwner: "new"}) || len(log) != 1 || log[0] != 11 {
				t.Fatalf("round %d: new applied, old %#v, log %v", i, se, log)
			}
			wantHighWater(t, s, r, 11, "new")
		case oldErr == nil && errors.As(newErr, &ae):
			oldWon++
			if ae.Record != (fence.Effect{OperationID: op, Resource: r, Token: 10, Owner: "old"}) || len(log) != 1 || log[0] != 10 {
				t.Fatalf("round %d: old applied, new %#v, log %v", i, ae, log)
			}
			wantHighWater(t, s, r, 10, "old")
		default:
			t.Fatalf("round %d: old %v, new %v, log %v: want exactly one applied", i, oldErr, newErr, log)
		}
	}
	t.Logf("%d rounds: new holder applied %d, old holder first %d", rounds, newWon, oldWon)
}

// wireTrips counts the round trips on a pool's connections at the socket:
// every write that follows a read starts one. It sees what a pgx tracer
// does not (statements prepared or deallocated before a batch).
type wireTrips struct{ n atomic.Int64 }

type tripConn struct {
	net.Conn
	c        *wireTrips
	readLast atomic.Bool
}

func (c *tripConn) Write(b []byte) (int, error) {
	if c.readLast.Swap(false) {
		c.c.n.Add(1)
	}
	return c.Conn.Write(b)
}

func (c *tripConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.readLast.Store(true)
	}
	return n, err
}

// TestApplyBatchRoundTrips: an accepted ApplyBatch is one round trip,
// whatever the number of statements and fences; a refused one is three
// (the batch, the ROLLBACK, the read of the mark or record that refused
// it, which carries one more on the wire: the DEALLOCATE of the statements
// pgx forgets after a failed batch), and the connection's next batch
// prepares its statements again, one more round trip for the new PREPARE.
func TestApplyBatchRoundTrips(t *testing.T) {
	base, _ := setup(t)
	rt, wire := &roundTrips{}, &wireTrips{}
	dialer := &net.Dialer{}
	_, s := poolWith(t, base, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1
		cfg.ConnConfig.Tracer = rt
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &tripConn{Conn: c, c: wire}, nil
		}
	})
	ctx := t.Context()
	for round := range 2 {
		r := func(name string) string { return fmt.Sprintf("%d:%s", round, name) }
		fz := func(resource string, tok lease.Token, owner, op string) fence.Fence {
			return f(r(resource), tok, owner, r(op))
		}
		one := func(op string) func() error {
			return func() error {
				b := &pgx.Batch{}
				b.Queue(`INSERT INTO counters VALUES ($1, 1) ON CONFLICT (resource) DO UPDATE SET n = counters.n + 1`, r("acct:1"))
				return s.ApplyBatch(ctx, fz("acct:1", 10, "a", op), b)
			}
		}
		// The warm-ups (trips 0: not measured) prepare the statements
		// again after the previous round's refusals.
		steps := []struct {
			name        string
			trips, wire int64
			run         func() error
			want        func(error) bool
		}{
			{"warm-up, one statement", 0, 0, one("op-w1"), isNil},
			{"warm-up, two statements", 0, 0, func() error {
				return s.ApplyBatch(ctx, fz("acct:1", 10, "a", "op-w2"), batchWrite(r("acct:1"), 10, 1))
			}, isNil},
			{"ApplyBatch, one statement", 1, 1, one("op-1"), isNil},
			{"ApplyBatch, two statements", 1, 1, func() error {
				return s.ApplyBatch(ctx, fz("acct:1", 10, "a", "op-2"), batchWrite(r("acct:1"), 10, 1))
			}, isNil},
			{"ApplyBatch, empty", 1, 1, func() error { return s.ApplyBatch(ctx, fz("acct:1", 10, "a", "op-3"), nil) }, isNil},
			{"ApplyMultiBatch", 1, 1, func() error {
				return s.ApplyMultiBatch(ctx, []fence.Fence{fz("acct:2", 10, "a", "op-4"), fz("acct:1", 10, "a", "op-4")}, batchWrite(r("acct:2"), 10, 1))
			}, isNil},
			{"ApplyBatch stale", 3, 4, func() error {
				return s.ApplyBatch(ctx, fz("acct:1", 9, "a", "op-5"), batchWrite(r("acct:1"), 9, 1))
			}, isStale},
			{"ApplyBatch after a refused batch", 1, 2, func() error {
				return s.ApplyBatch(ctx, fz("acct:1", 10, "a", "op-6"), batchWrite(r("acct:1"), 10, 1))
			}, isNil},
			{"ApplyBatch already applied", 3, 4, func() error {
				return s.ApplyBatch(ctx, fz("acct:1", 10, "a", "op-1"), batchWrite(r("acct:1"), 10, 1))
			}, isApplied},
		}
		for _, st := range steps {
			n, w := rt.n.Load(), wire.n.Load()
			if err := st.run(); !st.want(err) {
				t.Fatalf("round %d, %s: unexpected err %v", round, st.name, err)
			}
			if round == 0 || st.trips == 0 {
				continue
			}
			if got := rt.n.Load() - n; got != st.trips {
				t.Errorf("%s: %d traced round trips, want %d", st.name, got, st.trips)
			}
			if got := wire.n.Load() - w; got != st.wire {
				t.Errorf("%s: %d round trips on the wire, want %d", st.name, got, st.wire)
			}
		}
	}
}

// TestApplyBatchMigratesFromVersion3: a database at schema version 3 (no
// check function) with marks and effects of its own is brought to version
// 4 by Migrate, keeping them; before that, ApplyBatch fails saying to
// migrate and Apply works. Under the default prefix, NoTablePrefix's
// adopted tables and a schema with a prefix of its own.
func TestApplyBatchMigratesFromVersion3(t *testing.T) {
	pool := pgtest.New(t)
	ctx := t.Context()
	schema := pgtest.SchemaName(t)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	})
	if _, err := pool.Exec(ctx, `CREATE TABLE counters (resource text PRIMARY KEY, n bigint NOT NULL);
		CREATE TABLE acceptance_log (id bigserial PRIMARY KEY, resource text NOT NULL, token numeric(20,0) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []pgfence.Options{{}, {TablePrefix: pgfence.NoTablePrefix}, {Schema: schema, TablePrefix: "app_"}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			if err := pgfence.Migrate(ctx, pool, opts); err != nil {
				t.Fatal(err)
			}
			if v, err := pgfence.Version(ctx, pool, opts); v != pgfence.LatestVersion() || err != nil {
				t.Fatalf("version %d, %v; want %d", v, err, pgfence.LatestVersion())
			}
			s, err := pgfence.New(pool, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ApplyBatch(ctx, f("r", 1, "o", "op-new"), nil); err != nil {
				t.Fatalf("ApplyBatch on a fresh version 4: %v", err)
			}
			// Back to version 3, as a database migrated before version 4
			// (the later steps are idempotent and apply again).
			fences, _ := s.Tables()
			fn := fences[:len(fences)-len(`fences"`)] + `fence_check"`
			migrations := fences[:len(fences)-len(`fences"`)] + `migrations"`
			if _, err := pool.Exec(ctx, `DROP FUNCTION `+fn+`; DELETE FROM `+migrations+` WHERE version >= 4`); err != nil {
				t.Fatal(err)
			}
			if v, _ := pgfence.Version(ctx, pool, opts); v != 3 {
				t.Fatalf("version %d, want 3", v)
			}
			if err := s.Apply(ctx, f("r", 5, "o", "op-3"), write("r", 5, 1)); err != nil {
				t.Fatalf("Apply on version 3: %v", err)
			}
			err = s.ApplyBatch(ctx, f("r", 6, "o", "op-4"), batchWrite("r", 6, 1))
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42883" {
				t.Fatalf("ApplyBatch on version 3: %v, want undefined_function and a hint to migrate", err)
			}
			if err := pgfence.Migrate(ctx, pool, opts); err != nil {
				t.Fatal(err)
			}
			if v, _ := pgfence.Version(ctx, pool, opts); v != pgfence.LatestVersion() {
				t.Fatalf("version after Migrate %d, want %d", v, pgfence.LatestVersion())
			}
			wantHighWater(t, s, "r", 5, "o")
			err = s.ApplyBatch(ctx, f("r", 4, "o", "op-5"), nil)
			var se *fence.StaleError
			if !errors.As(err, &se) || se.StoredToken != 5 {
				t.Fatalf("stale against the mark kept over the migration: %v", err)
			}
			var ae *fence.AlreadyAppliedError
			if err := s.ApplyBatch(ctx, f("r", 6, "o", "op-3"), nil); !errors.As(err, &ae) || ae.Record.Token != 5 {
				t.Fatalf("effect kept over the migration: %v", err)
			}
			if err := s.ApplyBatch(ctx, f("r", 6, "o", "op-4"), batchWrite("r", 6, 1)); err != nil {
				t.Fatal(err)
			}
			wantHighWater(t, s, "r", 6, "o")
			if _, err := pool.Exec(ctx, `TRUNCATE counters, acceptance_log`); err != nil {
				t.Fatal(err)
			}
		})
	}
}
