package otelfencedq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

// TestTraceContextNeverFailsAnEnqueue: the trace context comes from the
// caller (an HTTP request's traceparent and tracestate, which any client
// may send); a tracestate longer than a job header may hold, or a job
// whose headers are already full, must not get the enqueue refused: the
// headers that fit are written (traceparent first), the attempt still
// continues the trace when traceparent fits.
func TestTraceContextNeverFailsAnEnqueue(t *testing.T) {
	tr := newTraced(t)
	// A valid tracestate of 30 members of 60 bytes: about 1.9 KB.
	members := make([]string, 30)
	for i := range members {
		members[i] = fmt.Sprintf("v%02d=%s", i, strings.Repeat("x", 56))
	}
	incoming := propagation.MapCarrier{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  strings.Join(members, ","),
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), incoming)
	if ts := trace.SpanContextFromContext(ctx).TraceState(); ts.Len() != 30 {
		t.Fatalf("the incoming tracestate has %d members, want 30", ts.Len())
	}
	res, err := tr.client.Enqueue(ctx, payment{Account: "a"})
	if err != nil {
		t.Fatalf("an enqueue with a long incoming tracestate: %v", err)
	}
	rec := jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	if rec.Headers["traceparent"] == "" {
		t.Fatalf("headers %v: want the traceparent kept", rec.Headers)
	}
	if a := tr.spans("attempt payment"); len(a) != 1 || a[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("attempt spans %+v: want one in the caller's trace", a)
	}

	// A job whose headers are already at the limit is enqueued without
	// the trace context rather than refused.
	full := make([]jobs.Option, jobs.MaxHeaders)
	for i := range full {
		full[i] = jobs.Header(fmt.Sprintf("h%02d", i), "v")
	}
	res, err = tr.client.Enqueue(ctx, payment{Account: "b"}, full...)
	if err != nil {
		t.Fatalf("an enqueue with %d headers of its own: %v", jobs.MaxHeaders, err)
	}
	rec = jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	if len(rec.Headers) != jobs.MaxHeaders || rec.Headers["traceparent"] != "" {
		t.Fatalf("headers %v: want the job's own %d", rec.Headers, jobs.MaxHeaders)
	}
}

// TestRefusedEnqueueRecordsNoInvalidKindOrQueue: a kind or queue name is
// validated after the middleware, and one that is refused may be anything
// the caller passed (a raw enqueue's kind from a relayed row, a queue
// built from user data): the span neither is named after it nor records it.
func TestRefusedEnqueueRecordsNoInvalidKindOrQueue(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}})
	ctx := context.Background()
	if _, err := client.EnqueueRaw(ctx, "refund alice@example.com", []byte(`{}`), jobs.Unchecked()); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("an invalid kind: %v", err)
	}
	if _, err := client.Enqueue(ctx, payment{Account: "a"}, jobs.Queue("mail for bob@example.com")); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("an invalid queue: %v", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		if strings.Contains(s.Name, "@") {
			t.Errorf("span named %q: after the refused kind", s.Name)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "@") {
				t.Errorf("span %s records %s = %q: the refused kind or queue", s.Name, kv.Key, v)
			}
		}
	}
}

// TestPartitionedQueueIsOneDestination: a job of a partitioned queue runs
// on one of its partitions (JobView.Queue names it), but its spans, the
// enqueue's and every attempt's, name the queue it was enqueued on, as
// pool and client metrics do.
func TestPartitionedQueueIsOneDestination(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg := jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}}
	client := jobs.NewClient(rdb, cfg)
	ctx := context.Background()
	if _, err := client.SetPartitions(ctx, "orders", 2, "test", "partitioned"); err != nil {
		t.Fatal(err)
	}
	pool, err := worker.NewPool(rdb, worker.Config{Jobs: cfg, Queues: map[string]int{"orders": 1},
		Middleware:  []worker.Middleware{otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp))},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Maintenance: worker.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(pool, jobs.WorkFunc[payment](func(context.Context, *jobs.Job[payment]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(runCtx) }()
	halt := sync.OnceFunc(func() { stop(); <-done })
	defer halt()
	res, err := client.Enqueue(ctx, payment{Account: "a"}, jobs.Queue("orders"), jobs.PartitionKey("account:a"))
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.WaitState(t, ledger.New(rdb, ledger.Config{Namespace: ns}), res.Partition, res.JobID, jobs.Succeeded)
	if rec.Queue == "orders" {
		t.Fatalf("the job ran on %s: want one of the queue's partitions", rec.Queue)
	}
	halt() // the attempt's span has ended once Run returns
	for _, s := range exp.GetSpans() {
		if q := attr(s, "messaging.destination.name").AsString(); q != "orders" {
			t.Errorf("span %s: destination %q, want orders", s.Name, q)
		}
	}
}
