package pgfence_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// SendConfirmation is the job an order commits with.
type SendConfirmation struct {
	Order string `json:"order"`
}

// Kind names the job kind.
func (SendConfirmation) Kind() string { return "send-confirmation" }

// An order row and its "send confirmation" job commit in one transaction;
// a rolled-back order leaves no job. A worker pool that is the maintenance leader relays
// the outbox runs the committed job. The example uses DATABASE_URL and
// REDIS_ADDR (or the local defaults), a private PostgreSQL schema (on the
// pool's search_path, so the default tables of pgfence.Enqueue live there)
// and a private Redis namespace, and deletes both at the end.
func Example_outbox() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := fmt.Sprintf("example_outbox_%d", time.Now().UnixNano())
	pool, err := exampleSchemaPool(ctx, schema)
	if err != nil {
		fmt.Println("postgres:", err)
		return
	}
	defer pool.Close()
	defer dropExampleSchema(schema)
	if err := pgfence.Migrate(ctx, pool, pgfence.Options{}); err != nil {
		fmt.Println("migrate:", err)
		return
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, total_cents bigint, confirmed boolean NOT NULL DEFAULT false)`); err != nil {
		fmt.Println(err)
		return
	}

	// placeOrder writes the order and its job in one transaction.
	placeOrder := func(id string, cents int64, commit bool) (string, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback(ctx) // a no-op after Commit
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, total_cents) VALUES ($1, $2)`, id, cents); err != nil {
			return "", err
		}
		op, err := pgfence.Enqueue(ctx, tx, SendConfirmation{Order: id})
		if err != nil || !commit {
			return op, err
		}
		return op, tx.Commit(ctx)
	}
	if _, err := placeOrder("o-1000", 1999, false); err != nil { // the customer's card was declined
		fmt.Println(err)
		return
	}
	var orders, outboxRows int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM fencedq_outbox)`).Scan(&orders, &outboxRows)
	fmt.Println("after rollback: orders", orders, "outbox rows", outboxRows)
	op, err := placeOrder("o-1001", 4200, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("committed with operation id from the outbox:", strings.HasPrefix(op, "outbox:"))

	// A pool that, as the maintenance leader, relays the outbox into the queue.
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-outbox-%d", time.Now().UnixNano())
	defer deleteExampleKeys(rdb, ns)
	outbox, err := pgfence.NewOutbox(pool, pgfence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := pgfence.New(pool, pgfence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	wp, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: ns}, Logger: slog.New(slog.DiscardHandler),
		Maintenance: worker.MaintenanceConfig{Outboxes: []worker.OutboxRelay{outbox}, EffectLog: store},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	sent := make(chan string, 1)
	_ = worker.Register(wp, jobs.WorkFunc[SendConfirmation](func(ctx context.Context, j *jobs.Job[SendConfirmation]) error {
		// Send the email (with the operation id as its idempotency key),
		// then mark the order, fenced by this attempt's token.
		f, _ := fence.FromContext(ctx)
		err := store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE orders SET confirmed = true WHERE id = $1`, j.Args.Order)
			return err
		})
		if err == nil {
			sent <- j.Args.Order
		}
		return err
	}))
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- wp.Run(runCtx) }()
	select {
	case order := <-sent:
		fmt.Println("confirmation sent for", order)
	case <-ctx.Done():
		fmt.Println("the committed job did not run")
	}
	stop()
	<-stopped // a graceful shutdown commits the outcome

	ledger := ledger.New(rdb, ledger.Config{Namespace: ns})
	if rec, err := ledger.FindByOperation(ctx, op); err == nil {
		fmt.Println("job:", rec.Kind, rec.State)
	} else {
		fmt.Println("ledger:", err)
	}
	stats, _ := ledger.Stats(ctx, jobs.DefaultQueue)
	fmt.Println("jobs enqueued:", stats["enqueued"])
	var confirmed bool
	_ = pool.QueryRow(ctx, `SELECT confirmed FROM orders WHERE id = 'o-1001'`).Scan(&confirmed)
	fmt.Println("order o-1001 confirmed:", confirmed)
	// Output:
	// after rollback: orders 0 outbox rows 0
	// committed with operation id from the outbox: true
	// confirmation sent for o-1001
	// job: send-confirmation succeeded
	// jobs enqueued: 1
	// order o-1001 confirmed: true
}

// exampleURL is DATABASE_URL or the local default server.
func exampleURL() string {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// exampleSchemaPool creates schema and returns a pool whose search_path is it.
func exampleSchemaPool(ctx context.Context, schema string) (*pgxpool.Pool, error) {
	conn, err := pgx.Connect(ctx, exampleURL())
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(exampleURL())
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return pgxpool.NewWithConfig(ctx, cfg)
}

// dropExampleSchema drops the example's schema and everything in it.
func dropExampleSchema(schema string) {
	ctx := context.Background()
	if conn, err := pgx.Connect(ctx, exampleURL()); err == nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = conn.Close(ctx)
	}
}

// deleteExampleKeys removes the example's keys from the shared Redis.
func deleteExampleKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
