package fencedqtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fencedqtest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Receipt is the application's job kind: mail an order's receipt.
type Receipt struct {
	Order string `json:"order"`
}

// Kind names the job kind.
func (Receipt) Kind() string { return "receipt" }

// ReceiptWorker mails receipts (here it records them).
type ReceiptWorker struct{ sent []string }

// Work mails the receipt, passing the attempt's fence with the call.
func (w *ReceiptWorker) Work(ctx context.Context, j *jobs.Job[Receipt]) error {
	f, _ := fence.FromContext(ctx)
	w.sent = append(w.sent, fmt.Sprintf("receipt for %s (fenced: %v)", j.Args.Order, f.Token > 0))
	return nil
}

// checkout is the code under test: it enqueues the order's receipt.
func checkout(ctx context.Context, client *jobs.Client, order string) error {
	_, err := client.Enqueue(ctx, Receipt{Order: order}, jobs.Queue("mail"), jobs.OperationID("receipt:"+order))
	return err
}

// In an application's test: assert that the code under test enqueued the
// receipt, then run its handler inline as a real attempt.
func Example() {
	t := testingT() // in a test: the test's *testing.T
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	cfg := jobs.Config{Namespace: fmt.Sprintf("example-test-%d", time.Now().UnixNano())}
	defer deleteKeys(rdb, cfg.Namespace)
	ctx := context.Background()

	client := jobs.NewClient(rdb, cfg)
	if err := checkout(ctx, client, "order-1"); err != nil {
		t.Fatal(err)
	}
	env := fencedqtest.New(rdb, cfg)
	job := fencedqtest.RequireEnqueued[Receipt](ctx, t, env, &fencedqtest.Want{
		Args: Receipt{Order: "order-1"}, Queue: "mail", OperationID: "receipt:order-1", State: jobs.Pending,
	})
	fmt.Println("enqueued:", job.Args.Order, job.Record.State)

	w := &ReceiptWorker{}
	res := fencedqtest.WorkJob(ctx, t, env, w, job.Record.Queue, job.Record.ID)
	fmt.Println(w.sent[0])
	fmt.Println("outcome:", res.Outcome, res.Record.State, res.Outcome == worker.OutcomeSucceeded)
	fencedqtest.RequireNotEnqueued[Receipt](ctx, t, env, &fencedqtest.Want{State: jobs.Pending})
	// Output:
	// enqueued: order-1 pending
	// receipt for order-1 (fenced: true)
	// outcome: succeeded succeeded true
}

// testingT stands in for a test's *testing.T in this example: it panics on
// a failure.
func testingT() testing.TB { return panicTB{} }

type panicTB struct{ testing.TB }

func (panicTB) Helper()                           {}
func (panicTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (panicTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
