package otelfencedq_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// TestNilOptionsMeanTheDefaults: WithPropagator(nil) and
// WithTracerProvider(nil) leave the defaults, so an enqueue through the
// middleware works instead of panicking.
func TestNilOptionsMeanTheDefaults(t *testing.T) {
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		otelfencedq.EnqueueMiddleware(otelfencedq.WithPropagator(nil), otelfencedq.WithTracerProvider(nil))}})
	if _, err := client.Enqueue(context.Background(), payment{Account: "a"}); err != nil {
		t.Fatal(err)
	}
}

// TestTypedNilProviderMeansTheDefault: a *sdktrace.TracerProvider left nil
// (tracing configured off) is a nil provider too: the middleware uses the
// global one instead of panicking.
func TestTypedNilProviderMeansTheDefault(t *testing.T) {
	var tp *sdktrace.TracerProvider
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}})
	_ = otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp))
	if _, err := client.Enqueue(context.Background(), payment{Account: "a"}); err != nil {
		t.Fatal(err)
	}
}
