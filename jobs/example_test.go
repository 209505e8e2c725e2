package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
)

// Invoice is a job kind: its value is the job's args, stored as JSON.
type Invoice struct {
	Customer string `json:"customer"`
	Cents    int64  `json:"cents"`
	Card     string `json:"card" fencedq:"sensitive"` // redacted wherever args are shown
}

// Kind names the job kind.
func (Invoice) Kind() string { return "invoice" }

// Validate rejects bad args before anything is written.
func (i Invoice) Validate() error {
	if i.Cents <= 0 {
		return fmt.Errorf("cents %d must be positive", i.Cents)
	}
	return nil
}

func exampleRedis() (*redis.Client, string) {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr}), fmt.Sprintf("example-jobs-%d", time.Now().UnixNano())
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// Enqueue a job, enqueue it again under the same operation id (nothing new
// is written), and read it back with its args redacted.
func Example() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	res, err := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 1200, Card: "4242"},
		jobs.Queue("billing"), jobs.OperationID("invoice-2024-001"), jobs.MaxRetries(3))
	if err != nil {
		panic(err)
	}
	again, _ := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 1200, Card: "4242"},
		jobs.Queue("billing"), jobs.OperationID("invoice-2024-001"))
	fmt.Println("deduplicated:", again.Deduplicated, again.JobID == res.JobID)

	_, err = client.Enqueue(ctx, Invoice{Customer: "bob"})
	fmt.Println("invalid:", err)

	rec, _ := client.Inspector().Get(ctx, "billing", res.JobID)
	fmt.Println(rec.State, rec.Kind, rec.MaxRetries, string(rec.Args))
	// Output:
	// deduplicated: true true
	// invalid: jobs: invalid argument: invoice: cents 0 must be positive
	// pending invoice 3 {"card":"[redacted]","cents":1200,"customer":"ada"}
}

// Enqueue middleware sees every job before it is written and may amend its
// options: here every job gets the tenant of the request that enqueued it,
// and a job enqueued without a queue goes to the tenant's.
func ExampleEnqueueMiddleware() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)

	type tenantKey struct{}
	tenancy := func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			tenant, _ := ctx.Value(tenantKey{}).(string)
			for _, r := range reqs {
				r.SetHeader("tenant", tenant)
				if r.Queue == jobs.DefaultQueue {
					r.Queue = "tenant-" + tenant
				}
			}
			return next(ctx, reqs)
		}
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{tenancy}})
	ctx := context.WithValue(context.Background(), tenantKey{}, "acme")
	res, err := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 1200})
	if err != nil {
		panic(err)
	}
	rec, _ := client.Inspector().Get(ctx, res.Queue, res.JobID)
	fmt.Println(rec.Queue, rec.Headers["tenant"])
	// Output:
	// tenant-acme acme
}

// One invoice job per customer at a time: the second enqueue for ada finds
// the first job, still pending, and writes nothing (add ByPeriod: time.Hour
// to also let a new one in each hour of Redis's clock).
func ExampleUnique() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	perCustomer := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	first, err := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 1200}, perCustomer)
	if err != nil {
		panic(err)
	}
	second, err := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 900}, perCustomer)
	if err != nil {
		panic(err)
	}
	other, _ := client.Enqueue(ctx, Invoice{Customer: "bob", Cents: 900}, perCustomer)
	fmt.Println(second.Deduplicated, second.JobID == first.JobID, other.Deduplicated)
	// Output:
	// true true false
}

// Durable acknowledgements: an enqueue is acknowledged only once a replica
// holds it. The Redis of this example has no replica, so the enqueue's
// outcome is unknown; enqueuing again under the same operation id is the
// safe retry (it ends in one job however many tries it takes).
func ExampleDurability() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		Durability: jobs.Durability{Replicas: 1, Timeout: 50 * time.Millisecond}})
	_, err := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 1200}, jobs.OperationID("invoice-2024-002"))
	fmt.Println("unknown:", errors.Is(err, jobs.ErrEnqueueUnknown))
	// Output:
	// unknown: true
}

// Export is a job kind under a concurrency limit: at most one export per
// customer runs at once, across every pool.
type Export struct {
	Customer string `json:"customer"`
}

// Kind names the job kind.
func (Export) Kind() string { return "export" }

// Limit gives the key ("export" is the limit's name in metrics) and max.
func (e Export) Limit() (string, int) { return "export:" + e.Customer, 1 }

// A second export for the same customer is parked until the first one's
// permit frees (no pool runs here, so the permit is promised to the first
// job, due and not yet claimed); another customer's export is not held up.
func ExampleLimiter() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	first, _ := client.Enqueue(ctx, Export{Customer: "cust-42"})
	second, _ := client.Enqueue(ctx, Export{Customer: "cust-42"})
	other, _ := client.Enqueue(ctx, Export{Customer: "cust-7"})
	for _, id := range []string{first.JobID, second.JobID, other.JobID} {
		rec, _ := client.Inspector().Get(ctx, jobs.DefaultQueue, id)
		fmt.Printf("%s %q\n", rec.State, rec.WaitingFor)
	}
	// Output:
	// pending ""
	// pending "limit export:cust-42, 0 of 1 held, 1 promised to due jobs"
	// pending ""
}

// Report is a job kind whose jobs belong to their tenant's fair group.
type Report struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

// Kind names the job kind.
func (Report) Kind() string { return "report" }

// Group puts the job in its tenant's group (see Grouper).
func (r Report) Group() string { return r.Tenant }

// A tenant with a backlog does not hold up another tenant: each group has
// one job in the queue's due index at a time, and claims take the groups in
// turns. A pending job says how many of its group are ahead of it.
func ExampleGrouper() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	var batch []jobs.Params
	for i := range 1000 {
		batch = append(batch, jobs.Params{Args: Report{Tenant: "acme", N: i}})
	}
	_, _ = client.EnqueueMany(ctx, batch)
	small, _ := client.Enqueue(ctx, Report{Tenant: "zeta"})
	// An option sets (or overrides) the group of any job.
	later, _ := client.Enqueue(ctx, Report{N: 1}, jobs.Group("zeta"), jobs.Delay(time.Minute))

	groups, _ := client.Inspector().Groups(ctx, jobs.DefaultQueue)
	for _, g := range groups {
		fmt.Println(g.Name, g.Pending, "pending")
	}
	for _, id := range []string{small.JobID, later.JobID} {
		rec, _ := client.Inspector().Get(ctx, jobs.DefaultQueue, id)
		fmt.Printf("%s: %s\n", rec.Group, rec.WaitingFor)
	}
	// Output:
	// acme 1000 pending
	// zeta 2 pending
	// zeta: group zeta, 0 ahead (next of its group)
	// zeta: group zeta, 1 ahead
}

// Declare a queue with partitions (each a whole queue in its own hash
// slot, spread over a Redis Cluster's masters), enqueue jobs of one
// partition key, which go to one partition, and read them by the queue's
// name.
func ExampleClient_SetPartitions() {
	rdb, ns := exampleRedis()
	defer rdb.Close()
	defer deleteKeys(rdb, ns)
	ctx := context.Background()

	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	prev, err := client.SetPartitions(ctx, "orders", 6, "alice", "month-end peak")
	if err != nil {
		panic(err)
	}
	fmt.Println("partitions before:", prev)

	a, _ := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 100}, jobs.Queue("orders"), jobs.PartitionKey("customer:ada"))
	b, _ := client.Enqueue(ctx, Invoice{Customer: "ada", Cents: 200}, jobs.Queue("orders"), jobs.PartitionKey("customer:ada"))
	fmt.Println("one partition:", a.Partition == b.Partition, a.Queue)

	rec, _ := client.Inspector().Get(ctx, "orders", a.JobID) // the queue's name finds the job's partition
	fmt.Println(rec.State, rec.Queue == a.Partition)

	layout, _ := client.Inspector().Partitions(ctx, "orders")
	fmt.Println("partitions now:", layout.Count)

	_, err = client.SetPartitions(ctx, "orders", 0, "alice", "none")
	fmt.Println(errors.Is(err, jobs.ErrInvalid))
	// Output:
	// partitions before: 1
	// one partition: true orders
	// pending true
	// partitions now: 6
	// true
}
