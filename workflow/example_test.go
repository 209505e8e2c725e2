package workflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

// OrderStep is one step of an order: charge, reserve, invoice or ship.
type OrderStep struct {
	Order int    `json:"order"`
	Step  string `json:"step"`
}

// Kind names the job kind.
func (OrderStep) Kind() string { return "order_step" }

// Receipt is what the charge step records for the steps after it.
type Receipt struct {
	ChargeID string `json:"charge_id"`
}

// An order: charge → (reserve, invoice) → ship. Each step writes its
// effect through pgfence with its fencing token (applied once, whatever
// retries), and ship reads the charge's receipt.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	pgURL := os.Getenv("DATABASE_URL")
	if pgURL == "" {
		pgURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	pg, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pg.Close()
	ns := fmt.Sprintf("example_%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	opts := pgfence.Options{Schema: ns}
	defer pg.Exec(context.Background(), "DROP SCHEMA "+ns+" CASCADE")
	if err := pgfence.Migrate(ctx, pg, opts); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pg.Exec(ctx, "CREATE TABLE "+ns+".effects (op text PRIMARY KEY, step text)"); err != nil {
		fmt.Println(err)
		return
	}
	store, _ := pgfence.New(pg, opts)

	cfg := jobs.Config{Namespace: ns}
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Println(err)
		return
	}
	shipped := make(chan string, 1)
	_ = worker.Register(pool, jobs.WorkFunc[OrderStep](func(ctx context.Context, j *jobs.Job[OrderStep]) error {
		f, _ := fence.FromContext(ctx) // the step's token and operation id ("order:7/charge")
		err := store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+ns+".effects VALUES ($1, $2)", f.OperationID, j.Args.Step)
			return err
		})
		if err != nil {
			return err
		}
		switch j.Args.Step {
		case "charge":
			return jobs.RecordOutput(ctx, Receipt{ChargeID: fmt.Sprintf("ch_%d", j.Args.Order)})
		case "ship":
			var r Receipt
			if err := j.DependencyOutput(ctx, "charge", &r); err != nil {
				return err
			}
			shipped <- r.ChargeID
		}
		return nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, cfg)
	w := workflow.New("order").
		Add("charge", OrderStep{Order: 7, Step: "charge"}).
		Add("reserve", OrderStep{Order: 7, Step: "reserve"}, workflow.After("charge")).
		Add("invoice", OrderStep{Order: 7, Step: "invoice"}, workflow.After("charge")).
		Add("ship", OrderStep{Order: 7, Step: "ship"}, workflow.After("reserve", "invoice"))
	res, err := workflow.Enqueue(ctx, client, w, workflow.OperationID("order:7"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("shipped after charge", <-shipped)
	again, _ := workflow.Enqueue(ctx, client, w, workflow.OperationID("order:7"))
	fmt.Println("enqueued twice, one workflow:", again.Deduplicated && again.ID == res.ID)
	stop()
	<-stopped
	st, _ := workflow.Get(ctx, client, res.ID)
	fmt.Println(st.State, st.Done, "of", st.Total)
	var n int
	_ = pg.QueryRow(ctx, "SELECT count(*) FROM "+ns+".effects").Scan(&n)
	fmt.Println("effects applied:", n)
	// Output:
	// shipped after charge ch_7
	// enqueued twice, one workflow: true
	// succeeded 4 of 4
	// effects applied: 4
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
