package maintenance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/jobs"
)

type orderArgs struct {
	Order string `json:"order"`
}

func (orderArgs) Kind() string { return "send-confirmation" }

// newOutbox returns a migrated PostgreSQL outbox in a private schema, and
// a function committing n jobs into it that returns their operation ids.
func newOutbox(t *testing.T) (*pgfence.Outbox, func(n int) []string) {
	pool := pgtest.New(t)
	if err := pgfence.Migrate(t.Context(), pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ob, func(n int) []string { return commitOrders(t, pool, ob, n) }
}

func commitOrders(t *testing.T, pool *pgxpool.Pool, ob *pgfence.Outbox, n int) []string {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	ps := make([]jobs.Params, n)
	for i := range ps {
		ps[i] = jobs.Params{Args: orderArgs{Order: fmt.Sprint("o-", i)}}
	}
	ops, err := ob.EnqueueMany(t.Context(), tx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestRelayPass: one pass drains the outbox, batch after batch, into the
// queue: every committed row becomes one job with the row's operation id.
// A deposed leader's pass is refused and leaves the rows in the outbox.
func TestRelayPass(t *testing.T) {
	f := newFixture(t)
	ob, commit := newOutbox(t)
	cfg := f.config()
	cfg.Outboxes = []Outbox{{Name: ob.Name(), Relay: ob.Relay, Listen: ob.Listen}}
	l := f.leader(cfg)
	r := l.relays[0]
	r.batch = 2
	leader := f.lead("pool-a")
	ops := commit(5)

	if err := r.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		rec, err := f.ledger.FindByOperation(f.ctx, op)
		if err != nil || rec.Kind != "send-confirmation" || rec.State != jobs.Pending {
			t.Fatalf("row %s: %+v, %v; want a pending job", op, rec, err)
		}
	}
	if n := f.rdb.ZCard(f.ctx, f.ledger.StateKey(jobs.DefaultQueue, jobs.Pending)).Val(); n != 5 {
		t.Fatalf("%d jobs for 5 rows", n)
	}
	if !f.logged("outbox relayed", `"jobs":5`, `"service":"outbox_relay"`, `"outbox":`, "fencedq_outbox") {
		t.Fatal("the relayed batch was not logged with its service and outbox")
	}

	late := commit(1)
	if err := r.runOnce(f.ctx, leader-1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a pass under an older token: %v, want fence.ErrStale", err)
	}
	if _, err := f.ledger.FindByOperation(f.ctx, late[0]); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("the deposed leader relayed a row: %v", err)
	}
	if err := r.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.FindByOperation(f.ctx, late[0]); err != nil {
		t.Fatalf("the leader did not relay the row left behind: %v", err)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceRelay)); v != 0 {
		t.Fatalf("relay errors %v: a pass's own error is counted by its loop, not by the pass", v)
	}
}

// TestRelayWaitsForReplicas: with the pool's jobs.Config.Durability, a
// relayed row leaves the outbox only once enough replicas hold its job. On
// a Redis without the replicas Durability asks for, the relay's enqueue is
// not acknowledged (jobs.ErrEnqueueUnknown) and every row stays in the
// outbox for the next pass, as a client's own enqueue would fail.
func TestRelayWaitsForReplicas(t *testing.T) {
	f := newFixture(t)
	pool := pgtest.New(t)
	if err := pgfence.Migrate(t.Context(), pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Outboxes = []Outbox{{Name: ob.Name(), Relay: ob.Relay, Listen: ob.Listen}}
	durableLedger := ledger.New(f.rdb, ledger.Config{Namespace: f.ns,
		Durability: durable.Options{Replicas: 1, Timeout: 100 * time.Millisecond}})
	l := New(cfg, durableLedger, f.leases)
	leader := f.lead("pool-a")
	commitOrders(t, pool, ob, 3)

	if err := l.relays[0].runOnce(f.ctx, leader); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("a pass no replica acknowledged: %v, want jobs.ErrEnqueueUnknown", err)
	}
	var left int
	if err := pool.QueryRow(f.ctx, `SELECT count(*) FROM `+ob.Table()).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 3 {
		t.Fatalf("%d rows left in the outbox after an enqueue no replica acknowledged, want 3", left)
	}
}

// TestRelayCountsRowsSetAside: rows the relay sets aside are counted by
// outbox (fencedq_outbox_rows_set_aside_total), and a batch that set rows
// aside does not end the pass: the rows after it are relayed too.
func TestRelayCountsRowsSetAside(t *testing.T) {
	f := newFixture(t)
	pool := pgtest.New(t)
	if err := pgfence.Migrate(t.Context(), pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Outboxes = []Outbox{{Name: ob.Name(), Relay: ob.Relay, Listen: ob.Listen}}
	r := f.leader(cfg).relays[0]
	r.batch = 2
	ops := commitOrders(t, pool, ob, 5)
	for _, op := range ops[:2] { // the first batch: both rows poison
		id := op[len(pgfence.OutboxOperationPrefix):]
		if _, err := pool.Exec(f.ctx, `UPDATE `+ob.Table()+` SET max_retries = -1 WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.runOnce(f.ctx, f.lead("pool-a")); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops[2:] {
		if _, err := f.ledger.FindByOperation(f.ctx, op); err != nil {
			t.Errorf("row %s after the set-aside batch not relayed in the same pass: %v", op, err)
		}
	}
	if v := testutil.ToFloat64(f.metrics.OutboxSetAside.WithLabelValues(ob.Name())); v != 2 {
		t.Fatalf("fencedq_outbox_rows_set_aside_total %v, want 2", v)
	}
}
