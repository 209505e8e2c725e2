package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/pgtest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type orderArgs struct {
	Order string `json:"order"`
	Card  string `json:"card,omitempty" fencedq:"sensitive"`
}

func (orderArgs) Kind() string { return "send-confirmation" }

type outboxEnv struct {
	pool   *pgxpool.Pool
	outbox *pgfence.Outbox
	client *jobs.Client
	ledger *ledger.Ledger
}

func newOutboxEnv(t *testing.T) *outboxEnv {
	rdb, ns := redistest.New(t)
	return newOutboxEnvOn(t, rdb, ns)
}

// newOutboxEnvOn is newOutboxEnv on a Redis the test controls (one it
// stops, fills or refuses writes on), in namespace ns ("" for the default).
func newOutboxEnvOn(t *testing.T, rdb redis.UniversalClient, ns string) *outboxEnv {
	t.Helper()
	pool := pgtest.New(t)
	if err := pgfence.Migrate(t.Context(), pool, pgfence.Options{}); err != nil {
		t.Fatal(err)
	}
	ob, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	return &outboxEnv{pool: pool, outbox: ob, client: c, ledger: ledger.New(rdb, ledger.Config{Namespace: ns})}
}

func (e *outboxEnv) inTx(t *testing.T, commit bool, f func(tx pgx.Tx)) {
	t.Helper()
	ctx := t.Context()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f(tx)
	if commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (e *outboxEnv) rows(t *testing.T) int {
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+e.outbox.Table()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *outboxEnv) pending(t *testing.T) int {
	ids, err := e.ledger.IDs(t.Context(), jobs.DefaultQueue, jobs.Pending, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

func TestOutboxRollbackAndCommit(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	e.inTx(t, false, func(tx pgx.Tx) {
		if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "o-1"}); err != nil {
			t.Fatal(err)
		}
	})
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 0 || err != nil {
		t.Fatalf("relay after rollback: %d, %v", n, err)
	}
	var op string
	e.inTx(t, true, func(tx pgx.Tx) {
		var err error
		if op, err = pgfence.Enqueue(ctx, tx, orderArgs{Order: "o-2", Card: "4242"}, jobs.MaxRetries(2), jobs.Timeout(time.Second)); err != nil {
			t.Fatal(err)
		}
		// Not visible to a relay before the commit.
		if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 0 || err != nil {
			t.Fatalf("relay before commit: %d, %v", n, err)
		}
	})
	if n, _, err := e.outbox.Relay(ctx, e.client, 10, 100); n != 1 || err != nil {
		t.Fatalf("relay after commit: %d, %v", n, err)
	}
	if e.rows(t) != 0 || e.pending(t) != 1 {
		t.Fatalf("%d rows left, %d jobs", e.rows(t), e.pending(t))
	}
	rec, err := e.ledger.FindByOperation(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kind != "send-confirmation" || rec.MaxRetries != 2 || rec.Timeout != time.Second ||
		string(rec.Payload) != `{"order":"o-2","card":"4242"}` || string(rec.Args) != `"[redacted]"` {
		t.Fatalf("job %+v args %s payload %s", rec, rec.Args, rec.Payload)
	}
	if _, err := e.outbox.EnqueueMany(ctx, nil, nil); !errors.Is(err, pgfence.ErrOptions) {
		t.Fatalf("nil tx: %v", err)
	}
	e.inTx(t, false, func(tx pgx.Tx) {
		_, err := e.outbox.EnqueueMany(ctx, tx, []jobs.Params{{Args: orderArgs{}}, {Args: orderArgs{}, Options: []jobs.Option{jobs.Queue("bad queue")}}})
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("invalid job: %v", err)
		}
	})
}

// TestOutboxRelayCrashMidBatch: a relay that dies between the enqueue and
// the rows' removal leaves them; the next relay enqueues each once.
func TestOutboxRelayCrashMidBatch(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	var ops []string
	e.inTx(t, true, func(tx pgx.Tx) {
		ps := make([]jobs.Params, 50)
		for i := range ps {
			ps[i] = jobs.Params{Args: orderArgs{Order: fmt.Sprint("o-", i)}}
		}
		var err error
		if ops, err = e.outbox.EnqueueMany(ctx, tx, ps); err != nil {
			t.Fatal(err)
		}
	})
	crash := errors.New("relay died")
	restore := pgfence.SetRelayHook(func() error { return crash })
	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 20); !errors.Is(err, crash) {
		t.Fatalf("relay with the hook: %v", err)
	}
	restore()
	if e.rows(t) != 50 || e.pending(t) != 20 {
		t.Fatalf("after the crash: %d rows, %d jobs", e.rows(t), e.pending(t))
	}
	for {
		n, _, err := e.outbox.Relay(ctx, e.client, 11, 20)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if e.rows(t) != 0 || e.pending(t) != 50 {
		t.Fatalf("after relaying: %d rows, %d jobs", e.rows(t), e.pending(t))
	}
	for _, op := range ops {
		if _, err := e.ledger.FindByOperation(ctx, op); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	// A deposed leader's relay is refused and leaves new rows in place.
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "late"}); err != nil {
			t.Fatal(err)
		}
	})
	if _, _, err := e.outbox.Relay(ctx, e.client, 10, 20); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale relay: %v", err)
	}
	if e.rows(t) != 1 {
		t.Fatalf("stale relay removed rows")
	}
}

// TestOutboxConcurrentRelays: relays racing over one outbox (two leaders
// around a handover) enqueue every row exactly once.
func TestOutboxConcurrentRelays(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	const total = 300
	e.inTx(t, true, func(tx pgx.Tx) {
		ps := make([]jobs.Params, total)
		for i := range ps {
			ps[i] = jobs.Params{Args: orderArgs{Order: fmt.Sprint("o-", i)}}
		}
		if _, err := e.outbox.EnqueueMany(ctx, tx, ps); err != nil {
			t.Fatal(err)
		}
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n, _, err := e.outbox.Relay(ctx, e.client, 10, 25)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if e.rows(t) != 0 || e.pending(t) != total {
		t.Fatalf("%d rows left, %d jobs for %d rows", e.rows(t), e.pending(t), total)
	}
}

// TestOutboxRelayedByPool: a pool's maintenance leader relays a committed row at
// the commit's notification and the job runs.
func TestOutboxRelayedByPool(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := t.Context()
	ran := make(chan string, 1)
	p, err := worker.NewPool(e.ledger.Redis(), worker.Config{
		Jobs: jobs.Config{Namespace: e.ledger.Namespace()}, LeaseTTL: time.Second,
		Logger: slog.New(slog.DiscardHandler),
		// A long poll: the job must come through the notification.
		Maintenance: worker.MaintenanceConfig{Interval: time.Minute, Outboxes: []worker.OutboxRelay{e.outbox}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error {
		ran <- j.Args.Order
		return nil
	}))
	listening := e.outbox.InitListening(t)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() { stop(); <-done }()
	// Wait until the leader's connection LISTENs; from then on only the
	// commit's notification wakes the relay within the test's time.
	listening.WaitOrTimeout()
	e.inTx(t, true, func(tx pgx.Tx) {
		if _, err := e.outbox.Enqueue(ctx, tx, orderArgs{Order: "o-9"}); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case got := <-ran:
		if got != "o-9" {
			t.Fatalf("ran %q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the committed job did not run within 20s")
	}
}
