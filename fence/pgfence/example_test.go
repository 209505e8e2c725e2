package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
)

// examplePool connects to DATABASE_URL or the local default server.
func examplePool(ctx context.Context) (*pgxpool.Pool, error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	return pgxpool.New(ctx, url)
}

func Example() {
	ctx := context.Background()
	pool, err := examplePool(ctx)
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer pool.Close()

	// A schema of its own, so the example never touches other tables.
	opts := pgfence.Options{Schema: fmt.Sprintf("example_%d", time.Now().UnixNano())}
	defer pool.Exec(ctx, "DROP SCHEMA "+opts.Schema+" CASCADE")
	if err := pgfence.Migrate(ctx, pool, opts); err != nil {
		fmt.Println("migrate:", err)
		return
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+opts.Schema+".accounts (id text PRIMARY KEY, balance bigint)"); err != nil {
		fmt.Println(err)
		return
	}
	store, _ := pgfence.New(pool, opts)

	debit := func(f fence.Fence, amount int64) error {
		return store.Apply(ctx, f, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+opts.Schema+".accounts VALUES ($1, -$2::bigint) "+
				"ON CONFLICT (id) DO UPDATE SET balance = accounts.balance - $2::bigint", f.Resource, amount)
			return err
		})
	}

	// Worker B holds the newer lease (token 34) and fences on acquire.
	_ = store.FenceOnAcquire(ctx, fence.Fence{Resource: "account:42", Token: 34, Owner: "worker-b"})
	err = debit(fence.Fence{Resource: "account:42", Token: 34, Owner: "worker-b", OperationID: "job-7"}, 500)
	fmt.Println("worker-b:", err)

	// Worker A wakes up from a pause with the expired lease (token 33).
	err = debit(fence.Fence{Resource: "account:42", Token: 33, Owner: "worker-a", OperationID: "job-7"}, 500)
	fmt.Println("worker-a stale:", errors.Is(err, fence.ErrStale))

	// A redelivery of the same job does not debit twice.
	err = debit(fence.Fence{Resource: "account:42", Token: 34, Owner: "worker-b", OperationID: "job-7"}, 500)
	fmt.Println("again already applied:", errors.Is(err, fence.ErrAlreadyApplied))

	// The reconciler asks the effect log.
	rec, ok, _ := store.Applied(ctx, "job-7")
	fmt.Println("applied:", ok, rec.Resource, rec.Token, rec.Owner)

	var balance int64
	_ = pool.QueryRow(ctx, "SELECT balance FROM "+opts.Schema+".accounts WHERE id = 'account:42'").Scan(&balance)
	fmt.Println("balance:", balance)
	// Output:
	// worker-b: <nil>
	// worker-a stale: true
	// again already applied: true
	// applied: true account:42 34 worker-b
	// balance: -500
}

func ExampleStore_ApplyMulti() {
	ctx := context.Background()
	pool, err := examplePool(ctx)
	if err != nil {
		fmt.Println("connect:", err)
		return
	}
	defer pool.Close()
	opts := pgfence.Options{Schema: fmt.Sprintf("example_%d", time.Now().UnixNano())}
	defer pool.Exec(ctx, "DROP SCHEMA "+opts.Schema+" CASCADE")
	if err := pgfence.Migrate(ctx, pool, opts); err != nil {
		fmt.Println("migrate:", err)
		return
	}
	store, _ := pgfence.New(pool, opts)

	// One transfer, two accounts, each fenced by its own lease token. The
	// effect log records it under the first (primary) resource.
	err = store.ApplyMulti(ctx, []fence.Fence{
		{Resource: "account:1", Token: 10, Owner: "w", OperationID: "transfer-5"},
		{Resource: "account:2", Token: 12, Owner: "w", OperationID: "transfer-5"},
	}, func(ctx context.Context, tx pgx.Tx) error {
		return nil // debit account:1 and credit account:2 through tx
	})
	fmt.Println(err)
	rec, _, _ := store.Applied(ctx, "transfer-5")
	fmt.Println(rec.Resource, rec.Token)
	// Output:
	// <nil>
	// account:1 10
}
