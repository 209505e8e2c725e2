package otelfencedq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// ScopeName is the instrumentation scope of the tracer the spans come from.
const ScopeName = "github.com/fencedq/fencedq/otelfencedq"

// The attributes set on spans, beyond the messaging conventions'
// (messaging.system "fencedq", messaging.operation.type,
// messaging.destination.name: the queue, messaging.message.id: the job id,
// see MessageID).
const (
	// AttrKind is the job's kind.
	AttrKind = attribute.Key("fencedq.job.kind")
	// AttrAttempt is the attempt's number, from 1.
	AttrAttempt = attribute.Key("fencedq.job.attempt")
	// AttrToken is the attempt's fencing token, in decimal.
	AttrToken = attribute.Key("fencedq.job.token")
	// AttrOutcome is what the attempt committed: the state the ledger
	// recorded, or (not applied: AttrRefused, or a commit that failed) the
	// outcome the attempt asked for (worker.JobView.Outcome).
	AttrOutcome = attribute.Key("fencedq.job.outcome")
	// AttrDeduplicated is true on an enqueue span whose operation id was
	// already known, or whose unique key another job held (jobs.Unique):
	// nothing was written, and the spans of the existing job's attempts
	// belong to the trace that enqueued it.
	AttrDeduplicated = attribute.Key("fencedq.job.deduplicated")
	// AttrRefused is true on an attempt's span when the ledger refused its
	// outcome as stale (a newer attempt's token owns the job, its lease
	// expired before the commit, or its record is gone): the outcome it
	// records was not applied.
	AttrRefused = attribute.Key("fencedq.job.refused")
)

var (
	system  = attribute.String("messaging.system", "fencedq")
	send    = attribute.String("messaging.operation.type", "send")
	process = attribute.String("messaging.operation.type", "process")
)

func destination(q string) attribute.KeyValue {
	return attribute.String("messaging.destination.name", q)
}

// queueOf returns the queue a job's queue name belongs to: a partition's
// name ("orders#1.2", what JobView.Queue gives for a job of a partitioned
// queue) names its queue, so every span of a job, and the metrics, name
// the queue it was enqueued on.
func queueOf(name string) string {
	q, _, _ := strings.Cut(name, "#")
	return q
}

// messageID is the job id; an id that names the job's operation id
// (jobs.OperationID) is recorded as MessageID makes it, so no operation id
// is recorded.
func messageID(id string) attribute.KeyValue {
	return attribute.String("messaging.message.id", MessageID(id))
}

// MessageID returns what spans record as messaging.message.id for job id:
// the id itself, or for an id that may name the job's operation id (one
// starting with '=': "=<queue>=<operation id>", see jobs.OperationID; no
// random id starts so) "=" and 16 hex digits of the id's SHA-256, the
// same for every span of the job.
func MessageID(id string) string {
	if !strings.HasPrefix(id, "=") {
		return id
	}
	return digest(id)
}

// digest is "=" and 16 hex digits of id's SHA-256: what spans record of
// a job id that may be an operation id.
func digest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "=" + hex.EncodeToString(sum[:8])
}

// Option configures the middleware.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider makes the spans come from tp (default: the global
// provider, otel.GetTracerProvider, read when the middleware is made; also
// for a nil tp, a nil *sdktrace.TracerProvider included).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator carries the trace context in the job's headers with p
// (default: W3C trace context, propagation.TraceContext). Whatever p
// writes is stored in the job record and shown to operators: keep baggage
// that may hold sensitive values out of it. A nil p keeps the default.
func WithPropagator(p propagation.TextMapPropagator) Option { return func(c *config) { c.prop = p } }

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if isNil(c.tp) {
		c.tp = otel.GetTracerProvider()
	}
	if isNil(c.prop) {
		c.prop = propagation.TraceContext{}
	}
	return c
}

// isNil reports whether v is nil or holds a nil pointer, map, func or
// channel: a *sdktrace.TracerProvider left nil (tracing configured off) is
// as nil as an untyped nil, and would panic on its first span.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
}

func (c config) tracer() trace.Tracer { return c.tp.Tracer(ScopeName) }

// EnqueueMiddleware returns the enqueue middleware (for
// jobs.Config.EnqueueMiddleware): one producer span per job, named
// "enqueue <kind>", a child of the span in the enqueue's context, whose
// trace context it writes into the job's headers before the write,
// replacing as a whole any the headers carried (see TaskHeaders).
func EnqueueMiddleware(opts ...Option) jobs.EnqueueMiddleware {
	c := newConfig(opts)
	tracer := c.tracer()
	return func(next jobs.EnqueueFunc) jobs.EnqueueFunc {
		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
			spans := make([]trace.Span, len(reqs))
			for i, r := range reqs {
				name, attrs := enqueueSpan(r)
				sctx, span := tracer.Start(c.parent(ctx, r), name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
				c.inject(sctx, r)
				spans[i] = span
			}
			ended := false
			defer func() {
				if ended {
					return
				}
				// A later middleware (or the args' encoding) panicked: end
				// the spans as failures, never quoting the panic, which may
				// quote the args, and let the panic go on.
				for _, span := range spans {
					span.RecordError(errEnqueuePanicked)
					span.SetStatus(codes.Error, "enqueue panicked")
					span.End()
				}
			}()
			res, err := next(ctx, reqs)
			ended = true
			for i, span := range spans {
				var out *jobs.Result
				if i < len(res) {
					out = res[i]
				}
				switch {
				case out != nil:
					span.SetAttributes(messageID(out.JobID), destination(out.Queue), AttrDeduplicated.Bool(out.Deduplicated))
				case err != nil:
					span.RecordError(enqueueError(err))
					span.SetStatus(codes.Error, "enqueue failed")
				default:
					// No result and no error: the client fails the call with
					// jobs.ErrEnqueueUnknown.
					span.RecordError(jobs.ErrEnqueueUnknown)
					span.SetStatus(codes.Error, "enqueue failed")
				}
				span.End()
			}
			return res, err
		}
	}
}

// enqueueSpan returns the name and attributes of r's enqueue span. The kind
// and queue are validated after the middleware, and one the enqueue then
// refuses may be anything the caller passed (a raw enqueue's kind from a
// relayed row, a queue name built from user data): the span is named
// after the kind and records the kind and queue only when they are valid.
func enqueueSpan(r *jobs.EnqueueRequest) (string, []attribute.KeyValue) {
	name, attrs := "enqueue", []attribute.KeyValue{system, send}
	if jobs.ValidateKind(r.Kind()) == nil {
		name += " " + r.Kind()
		attrs = append(attrs, AttrKind.String(r.Kind()))
	}
	if jobs.ValidateQueue(r.Queue) == nil {
		attrs = append(attrs, destination(r.Queue))
	}
	return name, attrs
}

// parent is the context r's enqueue span starts under: ctx, or, when ctx
// holds no span (an outbox's relay, a resubmission), the trace context r's
// headers already carry (Headers), so the job continues the trace that
// wrote it.
func (c config) parent(ctx context.Context, r *jobs.EnqueueRequest) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() || len(r.Headers) == 0 {
		return ctx
	}
	if carried := c.prop.Extract(ctx, propagation.MapCarrier(r.Headers)); trace.SpanContextFromContext(carried).IsValid() {
		return carried
	}
	return ctx
}

// inject writes the trace context of ctx into r's headers (see fit).
func (c config) inject(ctx context.Context, r *jobs.EnqueueRequest) {
	set, drop := c.fit(ctx, r.Headers)
	for _, k := range drop {
		delete(r.Headers, k)
	}
	for _, f := range set {
		r.SetHeader(f[0], f[1])
	}
}

// fit returns the fields of ctx's trace context, each as a key and value,
// that headers can take: each only if the headers then keep within a
// job's limits (jobs.ValidateHeaders): the trace context comes from the
// caller (an HTTP request's tracestate may be longer than a header holds)
// and never gets an enqueue refused. The fields go in the propagator's
// Fields order (traceparent before tracestate), so one that does not fit
// leaves the others in; the job's own headers always stay. When ctx has a
// trace context to write, it replaces the one headers carry as a whole:
// drop names the propagator's fields headers hold that it does not set (a
// tracestate of another trace, one that does not fit), to be removed, so
// no field of an earlier trace context stays beside the new one.
func (c config) fit(ctx context.Context, headers map[string]string) (set [][2]string, drop []string) {
	fields := propagation.MapCarrier{}
	c.prop.Inject(ctx, fields)
	if len(fields) == 0 {
		return nil, nil // no trace context: the headers stay as they are
	}
	keys := slices.Clone(c.prop.Fields())
	extra := fields.Keys()
	slices.Sort(extra)
	for _, k := range extra {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	h := maps.Clone(headers)
	if h == nil {
		h = map[string]string{}
	}
	for _, k := range keys {
		delete(h, k) // the old trace context, replaced (and its room freed)
	}
	for _, k := range keys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		h[k] = v
		if jobs.ValidateHeaders(h) != nil {
			delete(h, k)
			continue
		}
		set = append(set, [2]string{k, v})
	}
	for _, k := range keys {
		if _, had := headers[k]; had {
			if _, kept := h[k]; !kept {
				drop = append(drop, k)
			}
		}
	}
	return set, drop
}

// Headers returns the trace context of ctx as job headers (jobs.Header
// options), for a job written where no enqueue middleware runs: an outbox
// row written in the request's transaction (pgfence.Enqueue). The enqueue
// that later writes the job without a span in its context (the outbox's
// relay, through the pool's jobs.Config.EnqueueMiddleware) starts its span
// as a child of the trace context they carry, so the job's trace goes on
// from the writer's. Only the fields that fit a job's header limits are
// returned (a tracestate too long is left out), none for a ctx without a
// span; a job's own headers beside them may still be too many. Of opts
// only WithPropagator matters.
func Headers(ctx context.Context, opts ...Option) []jobs.Option {
	fields, _ := newConfig(opts).fit(ctx, nil)
	out := make([]jobs.Option, len(fields))
	for i, f := range fields {
		out[i] = jobs.Header(f[0], f[1])
	}
	return out
}

// errEnqueuePanicked is what an enqueue span records when the enqueue
// panicked (in a later middleware, or encoding the args): the caller gets
// the panic.
var errEnqueuePanicked = errors.New("enqueue panicked")

// errEnqueueFailed is what an enqueue span records of a failure of no
// class enqueueError knows.
var errEnqueueFailed = errors.New("enqueue failed")

// enqueueError is what an enqueue span records of a failed enqueue: the
// class of the failure, never its text, which may quote the operation id
// or the resource the job was refused for (or its args, in an error of
// their Validate method). The caller gets the whole error.
func enqueueError(err error) error {
	for _, class := range []error{jobs.ErrInvalid, jobs.ErrEnqueueUnknown, jobs.ErrNotSent, jobs.ErrOutOfMemory, jobs.ErrWriteRefused, jobs.ErrForeignKey, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, class) {
			return class
		}
	}
	return errEnqueueFailed
}

// Middleware returns the handler middleware (for worker.Config.Middleware,
// first in the list so its span covers the others): one consumer span per
// attempt, named "attempt <kind>", whose parent is the enqueue span the
// job's headers carry, so every attempt of a job, retries and re-runs
// included, continues the trace that enqueued it as a child of the same
// enqueue span. A job enqueued without a trace context (a raw enqueue from
// a client without the middleware) starts a new trace. The span ends once
// the pool tried to commit the attempt's outcome, recording what became of
// it (worker.JobView.AfterCommit): the state the ledger recorded, or
// AttrRefused for an outcome refused as stale, or an error for a commit
// that failed.
func Middleware(opts ...Option) worker.Middleware {
	c := newConfig(opts)
	tracer := c.tracer()
	return func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) (err error) {
			start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
				system, process, destination(queueOf(job.Queue())), messageID(job.ID()), AttrKind.String(job.Kind()),
				AttrAttempt.Int(job.Attempt()), AttrToken.String(job.Token().String()))}
			parent := c.prop.Extract(ctx, viewCarrier{job})
			if !trace.SpanContextFromContext(parent).IsRemote() {
				parent, start = ctx, append(start, trace.WithNewRoot())
			}
			ctx, span := tracer.Start(parent, "attempt "+job.Kind(), start...)
			// The span ends once: when the call ends, or when the stopping
			// pool abandons a handler that does not return (recorded
			// uncertain then, whatever it returns later).
			var once sync.Once
			stop := job.AfterAbandon(func() {
				once.Do(func() {
					span.SetAttributes(AttrOutcome.String(worker.OutcomeUncertain))
					span.RecordError(errAbandoned)
					span.SetStatus(codes.Error, worker.OutcomeUncertain)
					span.End()
				})
			})
			// Otherwise it ends once the pool tried to commit the attempt's
			// outcome, with what became of it (a commit refused as stale or
			// failed is on the span); the outcome the attempt asks for is
			// decided when the call ends, before that.
			var asked string
			var recorded error
			committing := job.AfterCommit(func(c worker.Commit) {
				once.Do(func() { endCommitted(span, asked, recorded, c) })
			})
			finish := func(err, rec error) {
				if committing {
					asked, recorded = job.Outcome(err), rec
					return
				}
				once.Do(func() { end(span, job.Outcome(err), rec) })
			}
			returned := false
			defer func() {
				stop()
				// A panic or runtime.Goexit after the handler returned leaves
				// the handler's outcome standing; before, the pool retries it.
				ran, herr := job.HandlerResult()
				if r := recover(); r != nil {
					recorded := herr
					if !ran {
						herr, recorded = panicError(r)
					}
					finish(herr, recorded)
					panic(r)
				}
				if !returned {
					if !ran {
						herr = errGoexit
					}
					err = herr
				}
				finish(err, err)
			}()
			err = next(ctx, job)
			returned = true
			return err
		}
	}
}

// errAbandoned is the error an attempt's span records when the stopping
// pool abandoned its handler, still running past the shutdown (see
// worker.JobView.AfterAbandon): the attempt is recorded uncertain.
var errAbandoned = errors.New("the stopping pool abandoned the attempt with its handler still running")

// errGoexit is the error an attempt's span records when its handler (or
// a middleware after this one) ended the goroutine with runtime.Goexit
// (t.FailNow in a handler under test) instead of returning: the pool
// commits it as it does a panic, a retry.
var errGoexit = errors.New("handler called runtime.Goexit (t.FailNow, t.Fatal) instead of returning")

// panicError returns the error the pool commits for a handler's panic
// with r, for the outcome, and the one its span records: the same text,
// but wrapping r when r is an error, so that attemptError reduces a fence
// or lease error panicked with (a must-style helper's panic(err)) to its
// class. Only the first: the pool does not judge a panic by the errors
// in it.
func panicError(r any) (committed, recorded error) {
	committed = fmt.Errorf("handler panicked: %v", r)
	if e, ok := r.(error); ok {
		return committed, fmt.Errorf("handler panicked: %w", e)
	}
	return committed, committed
}

// end ends an attempt's span with outcome, recording recorded (the
// handler's error, or what panicError records of a panic).
func end(span trace.Span, outcome string, recorded error) {
	span.SetAttributes(AttrOutcome.String(outcome))
	if recorded != nil {
		span.RecordError(attemptError(recorded))
	}
	if outcome != worker.OutcomeSucceeded {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// endCommitted ends an attempt's span with what became of the outcome it
// asked for (see end): the state the ledger recorded when it applied it;
// else AttrRefused and an error status for an outcome refused as stale,
// or errNotCommitted for a commit that failed.
func endCommitted(span trace.Span, asked string, recorded error, c worker.Commit) {
	outcome := asked
	if c.Applied {
		outcome = outcomeOf(c.State)
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	if recorded != nil {
		span.RecordError(attemptError(recorded))
	}
	switch {
	case c.Refused:
		span.SetAttributes(AttrRefused.Bool(true))
		span.SetStatus(codes.Error, "outcome refused as stale")
	case !c.Applied:
		span.RecordError(errNotCommitted)
		span.SetStatus(codes.Error, "outcome not committed")
	case outcome != worker.OutcomeSucceeded:
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// attemptError is what an attempt's span records of err, the error its
// handler (or a middleware) returned: err's text, with the text of every
// fence or lease error in its tree that names a resource, an owner or an
// operation id (fence.StaleError, fence.AlreadyAppliedError,
// lease.HeldError, a store's fence.ErrInProgress: what protected storage
// and leases answer) replaced by its class ("debit: fence: stale token"),
// and cut as the ledger and the pool's log cut it (ledger.MaxErrorLen).
// The ledger keeps the details for operators.
func attemptError(err error) error {
	msg := ledger.CapError(reduce(err.Error(), err))
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// reduce returns msg with the text of each fence or lease error in err's
// tree (see attemptError) replaced by its class.
func reduce(msg string, err error) string {
	var class error
	switch e := err.(type) {
	case *fence.StaleError:
		class = fence.ErrStale
	case *fence.AlreadyAppliedError:
		class = fence.ErrAlreadyApplied
	case *lease.HeldError:
		class = lease.ErrHeld
	case interface{ Unwrap() error }:
		if e.Unwrap() == fence.ErrInProgress { // "fence: operation in progress: <op> on <resource>"
			class = fence.ErrInProgress
		}
	}
	if class != nil {
		return strings.ReplaceAll(msg, err.Error(), class.Error())
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		if next := e.Unwrap(); next != nil {
			msg = reduce(msg, next)
		}
	case interface{ Unwrap() []error }:
		for _, next := range e.Unwrap() {
			if next != nil {
				msg = reduce(msg, next)
			}
		}
	}
	return msg
}

// viewCarrier reads a trace context from an attempt's job headers.
type viewCarrier struct{ job worker.JobView }

func (c viewCarrier) Get(key string) string { return c.job.Header(key) }
func (c viewCarrier) Set(string, string)    {} // an attempt's headers are read-only
func (c viewCarrier) Keys() []string {
	h := c.job.Headers()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
