package otelfencedq_test

import (
	"context"
	"testing"

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
