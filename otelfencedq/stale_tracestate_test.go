package otelfencedq_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// An earlier trace context, as a job's headers may carry it (copied from
// another job, an earlier request's otelfencedq.Headers, a delivered task's
// headers), with a vendor's tracestate.
const (
	staleParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	staleState  = "vendor=stale-value"
)

// TestTraceContextWrittenReplacesTheWholeOldOne: the trace context written
// into a job's headers (or a task's) replaces the one they carried, its
// tracestate too: a tracestate is the vendors' state of its own
// traceparent's trace, and one left beside another trace's traceparent
// hands the attempt the vendor state of a trace it is not part of.
func TestTraceContextWrittenReplacesTheWholeOldOne(t *testing.T) {
	tr := newTraced(t)
	ctx, span := tr.tp.Tracer("test").Start(context.Background(), "request") // no tracestate of its own
	defer span.End()
	old := []jobs.Option{jobs.Header("traceparent", staleParent), jobs.Header("tracestate", staleState), jobs.Header("tenant", "t1")}
	res, err := tr.client.Enqueue(ctx, payment{Account: "a"}, old...)
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	if !strings.Contains(rec.Headers["traceparent"], span.SpanContext().TraceID().String()) {
		t.Fatalf("headers %v: want the enqueue's trace context", rec.Headers)
	}
	if ts, ok := rec.Headers["tracestate"]; ok || rec.Headers["tenant"] != "t1" {
		t.Errorf("headers %v: the old trace's tracestate %q kept beside the new traceparent (want it gone, the job's own headers kept)", rec.Headers, ts)
	}

	// TaskHeaders too (the asynq bridge's tasks).
	h := otelfencedq.TaskHeaders(ctx, map[string]string{"traceparent": staleParent, "tracestate": staleState, "tenant": "t1"})
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(h)))
	if got.TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("TaskHeaders %v: want the ctx's trace", h)
	}
	if ts, ok := h["tracestate"]; ok || h["tenant"] != "t1" {
		t.Errorf("TaskHeaders %v: the old trace's tracestate %q kept beside the new traceparent", h, ts)
	}
}
