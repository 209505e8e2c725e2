package otelfencedq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
)

// TestAbandonedAttemptEndsItsSpan: a handler that ignores its cancelled
// context past the shutdown is abandoned by the pool, which records its
// attempt uncertain; the attempt's span ends then, uncertain and failed,
// before Run returns, not whenever (if ever) the handler returns.
func TestAbandonedAttemptEndsItsSpan(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}}
	pool, err := worker.NewPool(rdb, worker.Config{
		Jobs: cfg, Middleware: []worker.Middleware{otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp))},
		LeaseTTL: time.Second, ShutdownTimeout: 50 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Maintenance: worker.MaintenanceConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	if err := worker.Register(pool, jobs.WorkFunc[payment](func(ctx context.Context, j *jobs.Job[payment]) error {
		close(started)
		<-release // ignores ctx
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.NewClient(rdb, cfg).Enqueue(context.Background(), payment{Account: "a"}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	<-started
	stop()
	if err := <-done; !errors.Is(err, worker.ErrUnsettled) {
		t.Fatalf("Run = %v, want the handler abandoned", err)
	}
	var attempts []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "attempt payment" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 1 {
		t.Fatalf("ended attempt spans %d, want the abandoned attempt's", len(attempts))
	}
	a := attempts[0]
	if attr(a, otelfencedq.AttrOutcome).AsString() != worker.OutcomeUncertain || a.Status.Code != codes.Error || len(a.Events) == 0 {
		t.Fatalf("abandoned attempt's span: outcome %q, status %v, events %v; want uncertain, an error recorded",
			attr(a, otelfencedq.AttrOutcome).AsString(), a.Status, a.Events)
	}
}
