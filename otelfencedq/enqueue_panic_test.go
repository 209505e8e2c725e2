package otelfencedq_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// TestEnqueuePanicEndsTheSpan: an enqueue whose later middleware panics
// ends its enqueue span, as a failure that records no panic text, and the
// panic reaches the caller: the span is not left open, never exported.
func TestEnqueuePanicEndsTheSpan(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	panicking := func(jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(context.Context, []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			panic("tenant for card 4111 unknown")
		}
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp)), panicking}})
	func() {
		defer func() {
			if r := recover(); r != "tenant for card 4111 unknown" {
				t.Fatalf("recovered %v, want the middleware's panic", r)
			}
		}()
		_, _ = client.EnqueueMany(context.Background(), []jobs.Params{{Args: payment{Account: "a"}}, {Args: payment{Account: "b"}}})
	}()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want the 2 enqueue spans", len(spans))
	}
	for _, s := range spans {
		if s.Status.Code != codes.Error || s.Status.Description != "enqueue panicked" {
			t.Errorf("span %s: status %+v, want an error", s.Name, s.Status)
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				if v := kv.Value.String(); strings.Contains(v, "4111") {
					t.Errorf("span %s records %s = %q", s.Name, kv.Key, v)
				}
			}
		}
	}
}
