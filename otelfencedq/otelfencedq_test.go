package otelfencedq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/otelfencedq"
	"github.com/fencedq/fencedq/worker"
	"github.com/fencedq/fencedq/workflow"
)

type payment struct {
	Account string `json:"account"`
	Card    string `json:"card" fencedq:"sensitive"`
	Fail    int    `json:"fail"` // attempts that fail before one succeeds
}

func (payment) Kind() string { return "payment" }

// traced is one test's Redis, tracer provider, client and pool, all traced.
type traced struct {
	t      *testing.T
	exp    *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	open   *openAttempts
	client *jobs.Client
	ledger *ledger.Ledger
	pool   *worker.Pool
	calls  atomic.Int32
}

func newTraced(t *testing.T, register ...func(*worker.Pool) error) *traced {
	rdb, ns := redistest.New(t)
	return newTracedOn(t, rdb, ns, register...)
}

// newTracedOn is newTraced on Redis rdb, namespace ns.
func newTracedOn(t *testing.T, rdb *redis.Client, ns string, register ...func(*worker.Pool) error) *traced {
	exp, tp, open := newProvider(t)
	cfg := jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}}
	pool, err := worker.NewPool(rdb, worker.Config{
		Jobs: cfg, Middleware: []worker.Middleware{otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp))},
		LeaseTTL: time.Second, RetryDelay: func(int) time.Duration { return 10 * time.Millisecond },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Maintenance: worker.MaintenanceConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := &traced{t: t, exp: exp, tp: tp, open: open, client: jobs.NewClient(rdb, cfg), ledger: ledger.New(rdb, ledger.Config{Namespace: ns}), pool: pool}
	if err := worker.Register(pool, jobs.WorkFunc[payment](func(ctx context.Context, j *jobs.Job[payment]) error {
		tr.calls.Add(1)
		if j.Attempt <= j.Args.Fail {
			return errors.New("card network busy")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	for _, r := range register {
		if err := r(pool); err != nil {
			t.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return tr
}

// newProvider returns an in-memory exporter, a provider exporting each
// span to it as it ends, shut down with the test, and the count of its
// attempt spans not yet ended.
func newProvider(t *testing.T) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider, *openAttempts) {
	exp := tracetest.NewInMemoryExporter()
	open := &openAttempts{t: t, changed: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(open)) // exported as it ends, then counted
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp, open
}

// openAttempts counts the attempt spans started and not yet ended: an
// attempt's span ends once the pool tried its commit, after the job's
// state changed, so a test that saw the state waits for it (wait).
type openAttempts struct {
	t       *testing.T
	mu      sync.Mutex
	open    int
	changed chan struct{} // closed, and replaced, when open changes
}

func (o *openAttempts) add(n int, name string) {
	if !strings.HasPrefix(name, "attempt") {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open += n
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *openAttempts) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) { o.add(1, s.Name()) }
func (o *openAttempts) OnEnd(s sdktrace.ReadOnlySpan)                       { o.add(-1, s.Name()) }
func (o *openAttempts) Shutdown(context.Context) error                      { return nil }
func (o *openAttempts) ForceFlush(context.Context) error                    { return nil }

// wait waits until every attempt span started has ended.
func (o *openAttempts) wait() {
	o.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		o.mu.Lock()
		open, changed := o.open, o.changed
		o.mu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			o.t.Fatalf("%d attempt spans still open", open)
		}
	}
}

// waitAttempts waits until n attempt spans named name have ended.
func (tr *traced) waitAttempts(name string, n int) {
	tr.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		tr.open.mu.Lock()
		changed := tr.open.changed
		tr.open.mu.Unlock()
		ended := 0
		for _, s := range tr.exp.GetSpans() {
			if s.Name == name {
				ended++
			}
		}
		if ended >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			tr.t.Fatalf("%d spans %q ended, want %d", ended, name, n)
		}
	}
}

// spans returns the ended spans named name, oldest first, once every
// attempt span started has ended.
func (tr *traced) spans(name string) []tracetest.SpanStub {
	tr.open.wait()
	var out []tracetest.SpanStub
	for _, s := range tr.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestAttemptsContinueTheEnqueuersTrace: a job enqueued under a request's
// span gets an enqueue span that is its child; each attempt's span,
// retries included, is a child of that enqueue span in the same trace, with
// the attempt's number, token and outcome; no attribute holds the args.
func TestAttemptsContinueTheEnqueuersTrace(t *testing.T) {
	tr := newTraced(t)
	ctx, request := tr.tp.Tracer("app").Start(context.Background(), "POST /payments")
	res, err := tr.client.Enqueue(ctx, payment{Account: "acct-7", Card: "4242-secret", Fail: 1}, jobs.OperationID("pay-ada-1"))
	if err != nil {
		t.Fatal(err)
	}
	request.End()
	rec := jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)

	enq := tr.spans("enqueue payment")
	if len(enq) != 1 {
		t.Fatalf("enqueue spans %+v, want 1", enq)
	}
	e := enq[0]
	if e.Parent.SpanID() != request.SpanContext().SpanID() || e.SpanContext.TraceID() != request.SpanContext().TraceID() ||
		e.SpanKind != trace.SpanKindProducer || attr(e, "messaging.message.id").AsString() != otelfencedq.MessageID(res.JobID) ||
		attr(e, "messaging.destination.name").AsString() != "default" || attr(e, otelfencedq.AttrDeduplicated).AsBool() {
		t.Fatalf("enqueue span %+v: want a producer child of the request's span naming the job", e)
	}
	// The job record carries the enqueue span's W3C trace context.
	carried := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(rec.Headers))
	if sc := trace.SpanContextFromContext(carried); sc.SpanID() != e.SpanContext.SpanID() || sc.TraceID() != e.SpanContext.TraceID() {
		t.Fatalf("record headers %v carry %v, want the enqueue span %v", rec.Headers, sc, e.SpanContext)
	}

	attempts := tr.spans("attempt payment")
	if len(attempts) != 2 {
		t.Fatalf("attempt spans %+v, want 2 (a retry, then a success)", attempts)
	}
	var seen []string
	for _, a := range attempts {
		if a.SpanContext.TraceID() != e.SpanContext.TraceID() || a.Parent.SpanID() != e.SpanContext.SpanID() || !a.Parent.IsRemote() ||
			a.SpanKind != trace.SpanKindConsumer || attr(a, "messaging.message.id").AsString() != otelfencedq.MessageID(res.JobID) {
			t.Fatalf("attempt span %+v: want a consumer child of the enqueue span", a)
		}
		if attr(a, otelfencedq.AttrToken).AsString() == "" || attr(a, otelfencedq.AttrToken).AsString() == "0" {
			t.Fatalf("attempt span without its token: %v", a.Attributes)
		}
		seen = append(seen, attr(a, otelfencedq.AttrAttempt).String()+":"+attr(a, otelfencedq.AttrOutcome).AsString()+":"+a.Status.Code.String())
	}
	slices.Sort(seen)
	if want := []string{"1:retry:" + codes.Error.String(), "2:succeeded:" + codes.Unset.String()}; !slices.Equal(seen, want) {
		t.Fatalf("attempts %v, want %v", seen, want)
	}
	if tok1, tok2 := attr(attempts[0], otelfencedq.AttrToken).AsString(), attr(attempts[1], otelfencedq.AttrToken).AsString(); tok1 == tok2 {
		t.Fatalf("both attempts carry token %s", tok1)
	}
	for _, s := range tr.exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "4242") || strings.Contains(v, "pay-ada") || strings.Contains(v, "acct-7") {
				t.Fatalf("span %s attribute %s = %q holds args or the operation id", s.Name, kv.Key, v)
			}
		}
	}
}

// TestDeduplicatedAndUntracedEnqueues: an enqueue of a known operation id
// has a span marked deduplicated and writes nothing; a job enqueued
// without a trace context (no span in its context) still gets a span per
// attempt, as the root of a new trace.
func TestDeduplicatedAndUntracedEnqueues(t *testing.T) {
	tr := newTraced(t)
	ctx := context.Background()
	first, err := tr.client.Enqueue(ctx, payment{Account: "a"}, jobs.OperationID("once"))
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", first.JobID, jobs.Succeeded)
	again, err := tr.client.Enqueue(ctx, payment{Account: "a"}, jobs.OperationID("once"))
	if err != nil || !again.Deduplicated {
		t.Fatalf("second enqueue %+v %v, want deduplicated", again, err)
	}
	enq := tr.spans("enqueue payment")
	if len(enq) != 2 || attr(enq[0], otelfencedq.AttrDeduplicated).AsBool() || !attr(enq[1], otelfencedq.AttrDeduplicated).AsBool() {
		t.Fatalf("enqueue spans %+v: want the second marked deduplicated", enq)
	}
	if enq[0].Parent.IsValid() {
		t.Fatalf("an enqueue without a span in its context has parent %v", enq[0].Parent)
	}
	attempts := tr.spans("attempt payment")
	if len(attempts) != 1 || tr.calls.Load() != 1 || attempts[0].Parent.SpanID() != enq[0].SpanContext.SpanID() {
		t.Fatalf("attempts %+v (%d handler calls): want one, a child of the first enqueue", attempts, tr.calls.Load())
	}

	// An enqueue from a client without the middleware carries no trace
	// context: its attempt starts a trace.
	raw := jobs.NewClient(tr.ledger.Redis(), jobs.Config{Namespace: tr.ledger.Namespace()})
	res, err := raw.Enqueue(ctx, payment{Account: "b"})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	for _, a := range tr.spans("attempt payment") {
		if attr(a, "messaging.message.id").AsString() == otelfencedq.MessageID(res.JobID) && (a.Parent.IsValid() || a.SpanContext.TraceID() == enq[0].SpanContext.TraceID()) {
			t.Fatalf("an untraced job's attempt span %+v: want the root of a new trace", a)
		}
	}
}

// TestEnqueueManySpansEachJob: a batch gets one enqueue span per job,
// siblings under the caller's span, and each job's attempt continues its
// own enqueue span; a refused batch ends every span with an error.
func TestEnqueueManySpansEachJob(t *testing.T) {
	tr := newTraced(t)
	ctx, parent := tr.tp.Tracer("app").Start(context.Background(), "import")
	out, err := tr.client.EnqueueMany(ctx, []jobs.Params{{Args: payment{Account: "x"}}, {Args: payment{Account: "y"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.client.EnqueueMany(ctx, []jobs.Params{{Args: payment{}}, {Args: payment{}, Options: []jobs.Option{jobs.Queue("bad queue")}}}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("invalid batch: %v", err)
	}
	parent.End()
	for _, r := range out {
		jobstest.WaitState(t, tr.ledger, "default", r.JobID, jobs.Succeeded)
	}
	enq := tr.spans("enqueue payment")
	if len(enq) != 4 {
		t.Fatalf("%d enqueue spans, want 4", len(enq))
	}
	byJob := map[string]trace.SpanID{}
	for i, s := range enq {
		if s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("enqueue span %d is not a child of the caller's", i)
		}
		if i < 2 {
			byJob[attr(s, "messaging.message.id").AsString()] = s.SpanContext.SpanID()
		} else if s.Status.Code != codes.Error || len(s.Events) == 0 {
			t.Fatalf("span of a refused batch %+v: want an error", s)
		}
	}
	for _, a := range tr.spans("attempt payment") {
		if want := byJob[attr(a, "messaging.message.id").AsString()]; a.Parent.SpanID() != want {
			t.Fatalf("attempt of job %s has parent %v, want its own enqueue span %v", attr(a, "messaging.message.id").AsString(), a.Parent.SpanID(), want)
		}
	}
}

// TestWithPropagator: the propagator given writes and reads the job's
// headers, in place of W3C trace context.
func TestWithPropagator(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prop := otelfencedq.WithPropagator(spanIDPropagator{})
	cfg := jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp), prop)}}
	client := jobs.NewClient(rdb, cfg)
	res, err := client.Enqueue(context.Background(), payment{Account: "a"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := client.Inspector().Get(context.Background(), res.Queue, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || rec.Headers["x-span"] != spans[0].SpanContext.SpanID().String() || rec.Headers["traceparent"] != "" {
		t.Fatalf("headers %v, spans %+v: want only the custom propagator's header", rec.Headers, spans)
	}
}

// spanIDPropagator carries only the span id, under its own header.
type spanIDPropagator struct{}

func (spanIDPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	c.Set("x-span", trace.SpanContextFromContext(ctx).SpanID().String())
}
func (spanIDPropagator) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (spanIDPropagator) Fields() []string { return []string{"x-span"} }

type exiting struct{}

func (exiting) Kind() string { return "exiting" }

// TestAttemptEndingItsGoroutineIsNotASuccess: a handler that ends its
// goroutine with runtime.Goexit (t.FailNow in a handler under test) is
// retried by the pool as a panic is, so its attempt's span must say retry
// with an error status, not succeeded.
func TestAttemptEndingItsGoroutineIsNotASuccess(t *testing.T) {
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[exiting](func(ctx context.Context, j *jobs.Job[exiting]) error {
			if j.Attempt == 1 {
				runtime.Goexit()
			}
			return nil
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), exiting{})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	var seen []string
	for _, a := range tr.spans("attempt exiting") {
		seen = append(seen, attr(a, otelfencedq.AttrAttempt).String()+":"+attr(a, otelfencedq.AttrOutcome).AsString()+":"+a.Status.Code.String())
	}
	slices.Sort(seen)
	if want := []string{"1:retry:" + codes.Error.String(), "2:succeeded:" + codes.Unset.String()}; !slices.Equal(seen, want) {
		t.Fatalf("attempts %v, want %v", seen, want)
	}
}

// TestWorkflowStepsContinueTheEnqueuersTrace: a workflow's steps are
// enqueues of the client, so each gets an enqueue span under the caller's
// span and each step's attempt continues its own enqueue span.
func TestWorkflowStepsContinueTheEnqueuersTrace(t *testing.T) {
	tr := newTraced(t)
	ctx, request := tr.tp.Tracer("app").Start(context.Background(), "POST /orders")
	w := workflow.New("order").Add("charge", payment{Account: "a"}).Add("refund", payment{Account: "b"}, workflow.After("charge"))
	res, err := workflow.Enqueue(ctx, tr.client, w)
	if err != nil {
		t.Fatal(err)
	}
	request.End()
	byJob := map[string]trace.SpanID{}
	for _, s := range tr.spans("enqueue payment") {
		if s.Parent.SpanID() != request.SpanContext().SpanID() {
			t.Fatalf("enqueue span %+v is not a child of the caller's", s)
		}
		byJob[attr(s, "messaging.message.id").AsString()] = s.SpanContext.SpanID()
	}
	if len(byJob) != 2 {
		t.Fatalf("enqueue spans for %v, want one per step", byJob)
	}
	for _, name := range []string{"charge", "refund"} {
		jobstest.WaitState(t, tr.ledger, "default", res.Steps[name].JobID, jobs.Succeeded)
	}
	attempts := tr.spans("attempt payment")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for _, a := range attempts {
		id := attr(a, "messaging.message.id").AsString()
		if want, ok := byJob[id]; !ok || a.Parent.SpanID() != want || a.SpanContext.TraceID() != request.SpanContext().TraceID() {
			t.Fatalf("attempt of step %s has parent %v in trace %v, want its enqueue span %v in the caller's trace",
				id, a.Parent.SpanID(), a.SpanContext.TraceID(), want)
		}
	}
}

type reserved struct {
	Account string `json:"account"`
}

func (reserved) Kind() string { return "reserved" }

// Resource names a reserved resource, so every enqueue is refused.
func (r reserved) Resource() string { return "job:" + r.Account }

// TestRefusedEnqueueRecordsNoOperationIDOrResource: an enqueue refused for
// its operation id or its resource ends its span with an error, and
// neither the span's attributes nor its events hold the operation id or
// the resource the refusal names.
func TestRefusedEnqueueRecordsNoOperationIDOrResource(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp))}})
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, payment{Account: "a"}, jobs.OperationID("refund-alice@example.com\x07")); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("an operation id with a control character: %v", err)
	}
	if _, err := client.Enqueue(ctx, reserved{Account: "bob@example.com"}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("a reserved resource: %v", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		if s.Status.Code != codes.Error || len(s.Events) == 0 {
			t.Fatalf("span %s of a refused enqueue: status %v, events %v: want an error", s.Name, s.Status, s.Events)
		}
		kvs := slices.Clone(s.Attributes)
		for _, e := range s.Events {
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			if v := kv.Value.String(); strings.Contains(v, "alice@") || strings.Contains(v, "bob@") {
				t.Errorf("span %s records %s = %q: the operation id or resource", s.Name, kv.Key, v)
			}
		}
	}
}

type transfer struct {
	From string `json:"from"`
}

func (transfer) Kind() string       { return "transfer" }
func (t transfer) Resource() string { return "account:" + t.From }

// TestAttemptErrorsRecordNoResourceOwnerOrOperationID: a handler that
// returns what protected storage refused it with (fence.StaleError,
// fence.AlreadyAppliedError, wrapped with the handler's own words) or a
// lease's lease.HeldError gets an attempt span whose events keep the
// handler's words and the error's class but not the resource, owner or
// operation id those errors name.
func TestAttemptErrorsRecordNoResourceOwnerOrOperationID(t *testing.T) {
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[transfer](func(ctx context.Context, j *jobs.Job[transfer]) error {
			f, _ := fence.FromContext(ctx)
			switch j.Attempt {
			case 1:
				return fmt.Errorf("debit: %w", &fence.StaleError{Fence: f, StoredToken: f.Token + 1, StoredOwner: "other-worker/job-9"})
			case 2:
				return fmt.Errorf("debit: %w", &lease.HeldError{Resource: f.Resource, Owner: "other-worker/job-9", Token: 3})
			}
			return fmt.Errorf("debit: %w", &fence.AlreadyAppliedError{
				Record: fence.Effect{OperationID: f.OperationID, Resource: f.Resource, Token: f.Token - 1, Owner: "other-worker/job-9"}, Fence: f})
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), transfer{From: "alice@example.com"}, jobs.OperationID("refund-bob@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	attempts := tr.spans("attempt transfer")
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(attempts))
	}
	var classes []string
	for _, s := range attempts {
		if len(s.Events) == 0 {
			t.Fatalf("attempt %s: no error event", attr(s, otelfencedq.AttrAttempt).String())
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				v := kv.Value.String()
				if strings.Contains(v, "alice@") || strings.Contains(v, "bob@") || strings.Contains(v, "other-worker") {
					t.Errorf("attempt %s records %s = %q: a resource, owner or operation id", attr(s, otelfencedq.AttrAttempt).String(), kv.Key, v)
				}
				if kv.Key == "exception.message" {
					classes = append(classes, v)
				}
			}
		}
	}
	slices.Sort(classes)
	want := []string{"debit: " + fence.ErrAlreadyApplied.Error(), "debit: " + fence.ErrStale.Error(), "debit: " + lease.ErrHeld.Error()}
	if !slices.Equal(classes, want) {
		t.Fatalf("recorded errors %q, want %q", classes, want)
	}
}

// TestMiddlewarePanicAfterTheHandlerKeepsItsOutcome: a middleware after
// this one that panics once the handler returned leaves the handler's
// outcome standing in the pool, and so in the attempt's span: a success is
// not shown as a failed retry.
func TestMiddlewarePanicAfterTheHandlerKeepsItsOutcome(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp, tp, open := newProvider(t)
	panicking := func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			_ = next(ctx, job)
			panic("audit log down")
		}
	}
	cfg := jobs.Config{Namespace: ns}
	pool, err := worker.NewPool(rdb, worker.Config{
		Jobs: cfg, Middleware: []worker.Middleware{otelfencedq.Middleware(otelfencedq.WithTracerProvider(tp)), panicking},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Maintenance: worker.MaintenanceConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(pool, jobs.WorkFunc[payment](func(context.Context, *jobs.Job[payment]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	res, err := jobs.NewClient(rdb, cfg).Enqueue(context.Background(), payment{Account: "a"})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, ledger.New(rdb, ledger.Config{Namespace: ns}), "default", res.JobID, jobs.Succeeded)
	open.wait()
	spans := exp.GetSpans()
	if len(spans) != 1 || attr(spans[0], otelfencedq.AttrOutcome).AsString() != worker.OutcomeSucceeded || spans[0].Status.Code != codes.Unset {
		t.Fatalf("spans %+v: want one attempt span, succeeded", spans)
	}
}

// TestEnqueueWithoutResultIsAFailedSpan: a later enqueue middleware that
// returns neither results nor an error fails the call with
// jobs.ErrEnqueueUnknown, and the enqueue span says so instead of ending as
// if the job had been written.
func TestEnqueueWithoutResultIsAFailedSpan(t *testing.T) {
	rdb, ns := redistest.New(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	swallow := func(jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(context.Context, []*jobs.EnqueueRequest) ([]*jobs.Result, error) { return nil, nil }
	}
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns,
		EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware(otelfencedq.WithTracerProvider(tp)), swallow}})
	if _, err := client.Enqueue(context.Background(), payment{Account: "a"}); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue: %v, want ErrEnqueueUnknown", err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code != codes.Error || len(spans[0].Events) == 0 {
		t.Fatalf("spans %+v: want one enqueue span with an error", spans)
	}
}

type settle struct {
	Account string `json:"account"`
}

func (settle) Kind() string       { return "settle" }
func (s settle) Resource() string { return "account:" + s.Account }

// TestUncertainAttemptIsVisible: a handler that cannot tell whether its
// effect happened (jobs.Unknown) ends its attempt's span with the
// uncertain outcome as an error, its error recorded; the span's token is
// the one the job's resource lease fenced the attempt with, and the span
// names neither the resource nor the account.
func TestUncertainAttemptIsVisible(t *testing.T) {
	var fenced atomic.Value
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[settle](func(ctx context.Context, j *jobs.Job[settle]) error {
			f, _ := fence.FromContext(ctx)
			fenced.Store(f.Token.String())
			return jobs.Unknown(errors.New("settlement timed out"))
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), settle{Account: "acct-secret"})
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Uncertain)
	attempts := tr.spans("attempt settle")
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(attempts))
	}
	a := attempts[0]
	if got := attr(a, otelfencedq.AttrOutcome).AsString(); got != worker.OutcomeUncertain || a.Status.Code != codes.Error || a.Status.Description != worker.OutcomeUncertain {
		t.Errorf("outcome %q status %v %q, want uncertain as an error", got, a.Status.Code, a.Status.Description)
	}
	if len(a.Events) == 0 || !strings.Contains(fmt.Sprint(a.Events[0].Attributes), "settlement timed out") {
		t.Errorf("events %v, want the handler's error recorded", a.Events)
	}
	if got := attr(a, otelfencedq.AttrToken).AsString(); got != fenced.Load() {
		t.Errorf("span token %q, want the attempt's fencing token %v", got, fenced.Load())
	}
	if s := fmt.Sprint(a.Attributes, a.Events); strings.Contains(s, "acct-secret") {
		t.Errorf("the span names the account: %s", s)
	}
}

// TestAttemptErrorsOfSeveralRefusalsRecordNoResource: every fence or
// lease refusal in a handler's error is reduced to its class, not only
// the first one found (a handler writing to two stores, joining both
// refusals), and so is a store's fence.ErrInProgress, which names the
// operation id and resource.
func TestAttemptErrorsOfSeveralRefusalsRecordNoResource(t *testing.T) {
	tr := newTraced(t, func(p *worker.Pool) error {
		return worker.Register(p, jobs.WorkFunc[transfer](func(ctx context.Context, j *jobs.Job[transfer]) error {
			f, _ := fence.FromContext(ctx)
			if j.Attempt == 1 {
				other := fence.Fence{Resource: "account:carol@example.com", Token: f.Token, Owner: f.Owner, OperationID: f.OperationID}
				return errors.Join(
					&fence.StaleError{Fence: f, StoredToken: f.Token + 1},
					&fence.StaleError{Fence: other, StoredToken: f.Token + 1})
			}
			if j.Attempt == 2 {
				return fmt.Errorf("debit: %w", fmt.Errorf("%w: %q on %q", fence.ErrInProgress, f.OperationID, f.Resource))
			}
			return nil
		}))
	})
	res, err := tr.client.Enqueue(context.Background(), transfer{From: "alice@example.com"}, jobs.OperationID("refund-bob@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, tr.ledger, "default", res.JobID, jobs.Succeeded)
	attempts := tr.spans("attempt transfer")
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(attempts))
	}
	var classes []string
	for _, s := range attempts {
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				v := kv.Value.String()
				if strings.Contains(v, "alice@") || strings.Contains(v, "bob@") || strings.Contains(v, "carol@") {
					t.Errorf("attempt %s records %s = %q: a resource or operation id", attr(s, otelfencedq.AttrAttempt).String(), kv.Key, v)
				}
				if kv.Key == "exception.message" {
					classes = append(classes, v)
				}
			}
		}
	}
	slices.Sort(classes)
	want := []string{"debit: " + fence.ErrInProgress.Error(), fence.ErrStale.Error() + "\n" + fence.ErrStale.Error()}
	if !slices.Equal(classes, want) {
		t.Fatalf("recorded errors %q, want %q", classes, want)
	}
}
