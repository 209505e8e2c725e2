package otelfencedq_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/otelfencedq"
)

// bridged is an asynq server on a private Redis whose deliveries run
// under the bridge's middleware, behind AsynqMiddleware.
type bridged struct {
	srv      *redistest.Server
	ns       string
	exp      *tracetest.InMemoryExporter
	tp       *sdktrace.TracerProvider
	client   *asynq.Client
	bridge   *asynqfence.Bridge
	returned testsignal.Signal[error]
}

func newBridged(t *testing.T, register func(*asynq.ServeMux)) *bridged {
	return newBridgedWith(t, asynqfence.Options{}, register)
}

// newBridgedWith is newBridged with the bridge's options (its worker id
// and logger are set here).
func newBridgedWith(t *testing.T, opts asynqfence.Options, register func(*asynq.ServeMux)) *bridged {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	bg := &bridged{srv: srv, ns: redistest.Namespace(t), exp: exp, tp: tp, client: asynq.NewClientFromRedisClient(rdb)}
	bg.returned.Init(t, "delivery returned to asynq")
	opts.WorkerID, opts.Logger = "traced", slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := asynqfence.New(rdb, jobs.Config{Namespace: bg.ns}, opts)
	if err != nil {
		t.Fatal(err)
	}
	bg.bridge = b
	mux := asynq.NewServeMux()
	mux.Use(func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			err := next.ProcessTask(ctx, task)
			bg.returned.Signal(err) // the span ended before
			return err
		})
	}, otelfencedq.AsynqMiddleware(otelfencedq.WithTracerProvider(tp)), b.Middleware())
	register(mux)
	as := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: 2, Queues: map[string]int{"default": 1}, TaskCheckInterval: 20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond, ShutdownTimeout: time.Second, LogLevel: asynq.ErrorLevel,
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return 50 * time.Millisecond },
	})
	if err := as.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Shutdown)
	return bg
}

// spans returns the ended spans named name.
func (bg *bridged) spans(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range bg.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestBridgedAttemptsContinueTheEnqueuersTrace: each delivery run by the
// asynq bridge gets an attempt span, a child of the span that enqueued
// the task (its trace context carried in the task's headers), wrapping
// the handler's own spans, with the attempt's number, token and outcome,
// and neither the payload nor the operation id among its attributes.
func TestBridgedAttemptsContinueTheEnqueuersTrace(t *testing.T) {
	var inHandler testsignal.Signal[trace.SpanContext]
	inHandler.Init(t, "the handler's span")
	var tokens testsignal.Signal[fence.Fence]
	tokens.Init(t, "the handler's fence")
	bg := newBridged(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("payment", func(ctx context.Context, _ *asynq.Task) error {
			inHandler.Signal(trace.SpanContextFromContext(ctx))
			f, _ := fence.FromContext(ctx)
			tokens.Signal(f)
			return nil
		})
	})
	ctx, parent := bg.tp.Tracer("test").Start(context.Background(), "checkout")
	headers := otelfencedq.TaskHeaders(ctx, map[string]string{asynqfence.OperationHeader: "op-secret-77"})
	parent.End()
	if headers[asynqfence.OperationHeader] != "op-secret-77" || headers["traceparent"] == "" {
		t.Fatalf("TaskHeaders = %v, want the operation id kept and a traceparent added", headers)
	}
	task := asynq.NewTaskWithHeaders("payment", []byte(`{"card":"4111111111111111"}`), headers)
	if _, err := bg.client.Enqueue(task, asynq.TaskID("task-1")); err != nil {
		t.Fatal(err)
	}
	if err := bg.returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the delivery returned %v", err)
	}
	got := bg.spans("attempt payment")
	if len(got) != 1 {
		t.Fatalf("%d attempt spans, want 1 (spans: %v)", len(got), bg.exp.GetSpans())
	}
	s := got[0]
	if s.SpanKind != trace.SpanKindConsumer || s.Parent.SpanID() != parent.SpanContext().SpanID() ||
		s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("attempt span kind %v parent %v trace %v, want a consumer child of the enqueuer's span %v",
			s.SpanKind, s.Parent.SpanID(), s.SpanContext.TraceID(), parent.SpanContext())
	}
	if sc := inHandler.WaitOrTimeout(); sc.SpanID() != s.SpanContext.SpanID() {
		t.Fatalf("the handler's context carries span %v, want the attempt's %v", sc.SpanID(), s.SpanContext.SpanID())
	}
	f := tokens.WaitOrTimeout()
	for key, want := range map[string]string{"fencedq.job.attempt": "1", "fencedq.job.token": f.Token.String(),
		"fencedq.job.outcome": "succeeded", "fencedq.job.kind": "payment", "messaging.destination.name": "default"} {
		if v := attr(s, attribute.Key(key)).String(); v != want {
			t.Errorf("attribute %s = %q, want %q", key, v, want)
		}
	}
	if id := attr(s, "messaging.message.id").String(); id != digestOf("op-secret-77") {
		t.Errorf("messaging.message.id = %q, want the operation id's digest", id)
	}
	for _, a := range s.Attributes {
		if v := a.Value.String(); strings.Contains(v, "4111") || strings.Contains(v, "op-secret") {
			t.Errorf("attribute %s = %q records the payload or the operation id", a.Key, v)
		}
	}
	if s.Status.Code == codes.Error {
		t.Errorf("a succeeded attempt's span has status %v", s.Status)
	}
}

// digestOf is what spans record of a job id that is an operation id.
func digestOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "=" + hex.EncodeToString(sum[:8])
}

// TestBridgedRefusedCommitIsAnErrorSpan: a delivery whose outcome the
// ledger refused as stale (its lease expired while the handler ran) ends
// its span with an error status and fencedq.job.refused, not as the
// success its handler returned.
func TestBridgedRefusedCommitIsAnErrorSpan(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	bg := newBridged(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("note", func(context.Context, *asynq.Task) error {
			started <- struct{}{}
			<-release // ignores its context
			return nil
		})
	})
	if _, err := bg.client.Enqueue(asynq.NewTask("note", []byte(`{}`)), asynq.TaskID("x1"), asynq.MaxRetry(5)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not start")
	}
	lg := ledger.New(bg.srv.Client(), ledger.Config{Namespace: bg.ns})
	for hours := 1; ; hours++ {
		bg.srv.SetClockOffset(time.Duration(hours) * time.Hour)
		exp, err := lg.Expire(context.Background(), "default", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(exp.Moved) == 1 {
			break
		}
		if hours == 10 {
			t.Fatal("the expirer never found the delivery's lease expired")
		}
	}
	close(release)
	if err := bg.returned.WaitOrTimeout(); !errors.Is(err, asynqfence.ErrSuperseded) {
		t.Fatalf("the delivery returned %v, want ErrSuperseded", err)
	}
	got := bg.spans("attempt note")
	if len(got) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(got))
	}
	s := got[0]
	if v := attr(s, "fencedq.job.refused").String(); v != "true" || s.Status.Code != codes.Error {
		t.Fatalf("refused commit's span: refused %q, status %v; want true and an error", v, s.Status)
	}
	if id := attr(s, "messaging.message.id").String(); id != "x1" {
		t.Errorf("messaging.message.id = %q, want asynq's task id", id)
	}
}

// TestBridgedRetryAndDuplicateSpans: a delivery whose handler fails is a
// retry with an error status, its fence error recorded by its class; the
// next one is attempt 2, succeeded; a later task of the same operation
// runs nothing (a duplicate), and its span records no attempt and no
// error.
func TestBridgedRetryAndDuplicateSpans(t *testing.T) {
	bg := newBridged(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("payment", func(ctx context.Context, _ *asynq.Task) error {
			if a, _ := asynqfence.AttemptFromContext(ctx); a.Attempt == 1 {
				return fmt.Errorf("debit: %w", &fence.StaleError{Fence: fence.Fence{Resource: "account:secret-42", Token: 1}, StoredToken: 5})
			}
			return nil
		})
	})
	headers := map[string]string{asynqfence.OperationHeader: "op-1"}
	if _, err := bg.client.Enqueue(asynq.NewTaskWithHeaders("payment", []byte(`{}`), headers), asynq.TaskID("t1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := bg.returned.WaitOrTimeout(); err == nil {
		t.Fatal("the failed attempt returned nil to asynq")
	}
	if err := bg.returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the retry returned %v", err)
	}
	if _, err := bg.client.Enqueue(asynq.NewTaskWithHeaders("payment", []byte(`{}`), headers), asynq.TaskID("t2")); err != nil {
		t.Fatal(err)
	}
	if err := bg.returned.WaitOrTimeout(); err != nil {
		t.Fatalf("the duplicate returned %v", err)
	}
	got := bg.spans("attempt payment")
	if len(got) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(got))
	}
	first, second, dup := got[0], got[1], got[2]
	if o := attr(first, otelfencedq.AttrOutcome).String(); o != "retry" || first.Status.Code != codes.Error {
		t.Errorf("failed attempt: outcome %q status %v, want retry and an error", o, first.Status)
	}
	if len(first.Events) != 1 || !strings.Contains(fmt.Sprint(first.Events[0].Attributes), "debit: fence: stale token") ||
		strings.Contains(fmt.Sprint(first.Events), "secret-42") {
		t.Errorf("failed attempt's events %v, want the error with its fence refusal reduced to its class", first.Events)
	}
	if a, o := attr(second, otelfencedq.AttrAttempt).String(), attr(second, otelfencedq.AttrOutcome).String(); a != "2" || o != "succeeded" {
		t.Errorf("retry: attempt %q outcome %q, want 2 and succeeded", a, o)
	}
	if o := attr(dup, otelfencedq.AttrOutcome); o.Type() != attribute.EMPTY || dup.Status.Code == codes.Error || len(dup.Events) != 0 {
		t.Errorf("duplicate delivery: outcome %v status %v events %v, want none of them", o.String(), dup.Status, dup.Events)
	}
}
