package otelfencedq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// TestHeadersCarryTheWritersTrace: a job written where the enqueue
// middleware does not run (an outbox row in the request's transaction)
// carries the request's trace context in its headers (Headers); the
// enqueue that later writes it without a span in its context (the
// outbox's relay) continues that trace instead of starting a new one, and
// so does every attempt. A tracestate too long for a header is left out,
// never the job refused.
func TestHeadersCarryTheWritersTrace(t *testing.T) {
	tr := newTraced(t)
	ctx, request := tr.tp.Tracer("app").Start(context.Background(), "POST /orders")
	opts := otelfencedq.Headers(ctx)
	request.End()
	res, err := tr.client.Enqueue(context.Background(), payment{Account: "a"}, opts...) // the relay: no span
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	enq := tr.spans("enqueue payment")
	if len(enq) != 1 || enq[0].SpanContext.TraceID() != request.SpanContext().TraceID() ||
		enq[0].Parent.SpanID() != request.SpanContext().SpanID() {
		t.Fatalf("enqueue spans %+v: want one, a child of the writer's span %v", enq, request.SpanContext())
	}
	if a := tr.spans("attempt payment"); len(a) != 1 || a[0].Parent.SpanID() != enq[0].SpanContext.SpanID() {
		t.Fatalf("attempt spans %+v: want one, a child of the enqueue span", a)
	}

	members := make([]string, 30)
	for i := range members {
		members[i] = fmt.Sprintf("v%02d=%s", i, strings.Repeat("x", 56))
	}
	long := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  strings.Join(members, ","),
	})
	if _, err := jobs.Prepare(payment{}, otelfencedq.Headers(long)...); err != nil {
		t.Fatalf("a job with the headers of a long tracestate: %v", err)
	}
	if len(otelfencedq.Headers(long)) != 1 {
		t.Fatalf("headers of a long tracestate: %d options, want the traceparent's only", len(otelfencedq.Headers(long)))
	}
	if len(otelfencedq.Headers(context.Background())) != 0 {
		t.Fatal("headers of a context without a span: want none")
	}
}
