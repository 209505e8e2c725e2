package otelfencedq_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

// Receipt is a job kind.
type Receipt struct {
	Order string `json:"order"`
}

// Kind names the job kind.
func (Receipt) Kind() string { return "receipt" }

// A job enqueued inside a request's span is worked in the same trace: the
// attempt's span is a child of the enqueue span, itself a child of the
// request's. An application passes its own TracerProvider (or sets the
// global one); this example keeps the spans in memory to print them.
func Example() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-otel-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)

	cfg := jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp)),
	}}
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg,
		Middleware: []worker.Middleware{otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp))},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	_ = worker.Register(pool, jobs.WorkFunc[Receipt](func(ctx context.Context, j *jobs.Job[Receipt]) error {
		defer close(done)
		return nil
	}))
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(runCtx) }()

	client := jobs.NewClient(rdb, cfg)
	reqCtx, request := tp.Tracer("shop").Start(ctx, "POST /orders")
	if _, err := client.Enqueue(reqCtx, Receipt{Order: "o-1"}); err != nil {
		panic(err)
	}
	request.End()
	<-done
	stop()
	<-stopped // the attempt's span has ended once Run returns

	names := map[string]string{request.SpanContext().SpanID().String(): "POST /orders"}
	for _, s := range spans.GetSpans() {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	// Spans are exported as they end: the attempt's may end before the
	// enqueue's (the pool is woken by the write), so print them in the
	// trace's order.
	for _, name := range []string{"enqueue receipt", "attempt receipt"} {
		for _, s := range spans.GetSpans() {
			if s.Name == name && s.Parent.IsValid() {
				fmt.Printf("%s: child of %s, same trace: %v\n", s.Name, names[s.Parent.SpanID().String()],
					s.SpanContext.TraceID() == request.SpanContext().TraceID())
			}
		}
	}
	// Output:
	// enqueue receipt: child of POST /orders, same trace: true
	// attempt receipt: child of enqueue receipt, same trace: true
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "*"+ns+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
