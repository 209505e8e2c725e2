package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// Greeting is a job kind.
type Greeting struct {
	Name string `json:"name"`
}

// Kind names the job kind.
func (Greeting) Kind() string { return "greeting" }

func Example() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg := jobs.Config{Namespace: ns} // stated once, for the pool and the client
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	done := make(chan string, 1)
	_ = worker.Register(pool, jobs.WorkFunc[Greeting](func(ctx context.Context, j *jobs.Job[Greeting]) error {
		done <- fmt.Sprintf("hello %s (attempt %d, fenced: %v)", j.Args.Name, j.Attempt, j.Token > 0)
		return nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, cfg)
	defer client.Close()
	res, err := client.Enqueue(ctx, Greeting{Name: "ada"}, jobs.OperationID("greet-ada"))
	if err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	again, _ := client.Enqueue(ctx, Greeting{Name: "ada"}, jobs.OperationID("greet-ada"))
	fmt.Println("same operation deduplicated:", again.Deduplicated && again.JobID == res.JobID)
	stop()
	<-stopped // Run returns after a graceful shutdown; close Redis only then
	// Output:
	// hello ada (attempt 1, fenced: true)
	// same operation deduplicated: true
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// A middleware wraps every attempt: here it puts the job's tenant header
// into the handler's context and reports how each attempt ended.
func ExampleMiddleware() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-mw-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type tenantKey struct{}
	ended := make(chan string, 2)
	tenancy := func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			ctx = context.WithValue(ctx, tenantKey{}, job.Header("tenant"))
			err := next(ctx, job)
			ended <- fmt.Sprintf("%s attempt %d: %s", job.Kind(), job.Attempt(), job.Outcome(err))
			return err
		}
	}
	cfg := jobs.Config{Namespace: ns}
	pool, err := worker.NewPool(rdb, worker.Config{
		Jobs: cfg, Middleware: []worker.Middleware{tenancy},
		RetryDelay: func(int) time.Duration { return 10 * time.Millisecond },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	var tries atomic.Int32
	_ = worker.Register(pool, jobs.WorkFunc[Greeting](func(ctx context.Context, j *jobs.Job[Greeting]) error {
		if tries.Add(1) == 1 {
			return fmt.Errorf("greeting service busy")
		}
		fmt.Printf("hello %s, for tenant %s\n", j.Args.Name, ctx.Value(tenantKey{}))
		return nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, cfg)
	if _, err := client.Enqueue(ctx, Greeting{Name: "ada"}, jobs.Header("tenant", "acme")); err != nil {
		panic(err)
	}
	fmt.Println(<-ended)
	fmt.Println(<-ended)
	stop()
	<-stopped
	// Output:
	// greeting attempt 1: retry
	// hello ada, for tenant acme
	// greeting attempt 2: succeeded
}

// Call is a job kind under a rate limit: at most 2 calls to the provider
// start per 200 ms, across every pool.
type Call struct {
	N int `json:"n"`
}

// Kind names the job kind.
func (Call) Kind() string { return "call" }

// RateLimit gives the key ("provider" is the rate's name in metrics), the
// most starts and the period.
func (Call) RateLimit() (string, int, time.Duration) { return "provider", 2, 200 * time.Millisecond }

// Six calls at 2 per 200 ms: the pool claims them, the rate defers the ones
// that may not start yet to their earliest start (by Redis's clock), and
// every call runs once, no attempt consumed by a wait.
func ExampleConfig_rateLimit() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg := jobs.Config{Namespace: ns}
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	var firstAttempts atomic.Int64
	done := make(chan struct{}, 6)
	_ = worker.Register(pool, jobs.WorkFunc[Call](func(ctx context.Context, j *jobs.Job[Call]) error {
		if j.Attempt == 1 {
			firstAttempts.Add(1)
		}
		done <- struct{}{}
		return nil
	}))
	client := jobs.NewClient(rdb, cfg)
	defer client.Close()
	t0 := time.Now()
	for i := range 6 {
		if _, err := client.Enqueue(ctx, Call{N: i}); err != nil {
			panic(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()
	for range 6 {
		<-done
	}
	stop()
	<-stopped
	st, _ := client.Inspector().Stats(ctx, jobs.DefaultQueue)
	fmt.Println("ran:", firstAttempts.Load(), "each on its first attempt")
	fmt.Println("took at least 400 ms:", time.Since(t0) >= 400*time.Millisecond)
	fmt.Println("deferred, not retried:", st["rate_deferrals"] > 0, st["retried"] == 0)
	// Output:
	// ran: 6 each on its first attempt
	// took at least 400 ms: true
	// deferred, not retried: true true
}

// Register a periodic job: the maintenance leader enqueues each tick once,
// with an operation id naming the schedule and the tick.
func ExamplePool_AddPeriodic() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-periodic-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pool, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	ticked := make(chan string, 1)
	_ = worker.Register(pool, jobs.WorkFunc[Greeting](func(ctx context.Context, j *jobs.Job[Greeting]) error {
		id, _, _ := jobs.ParsePeriodicOperationID(j.OperationID)
		select {
		case ticked <- fmt.Sprintf("%s: hello %s", id, j.Args.Name):
		default: // a later tick
		}
		return nil
	}))
	// Every pool that may become the maintenance leader registers the same
	// schedules, before Run.
	err = pool.AddPeriodic(worker.Periodic(worker.Every(time.Second), Greeting{Name: "team"}, worker.ScheduleID("greet-team")))
	if err != nil {
		panic(err)
	}
	err = pool.AddPeriodic(worker.Periodic(worker.Cron("0 9 * * *"), Greeting{Name: "ops"}, worker.InTimeZone(time.Local)))
	fmt.Println("local zone refused:", errors.Is(err, worker.ErrSchedule))

	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()
	select {
	case s := <-ticked:
		fmt.Println(s)
	case <-ctx.Done():
		fmt.Println("no tick:", ctx.Err())
	}
	stop()
	<-stopped
	// Output:
	// local zone refused: true
	// greet-team: hello team
}
