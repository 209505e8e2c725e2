package otelfencedq

import (
	"context"
	"errors"
	"maps"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TaskHeaders returns headers with the trace context of ctx added, for an
// asynq task delivered through the asynq bridge (asynq.NewTaskWithHeaders):
// AsynqMiddleware's attempt spans continue the trace. Only the fields that
// fit a job's header limits are added, none for a ctx without a span; a
// trace context headers already carry is replaced as a whole (its
// tracestate too, when ctx's has none or it does not fit); the headers
// given are not changed. Of opts only WithPropagator matters.
func TaskHeaders(ctx context.Context, headers map[string]string, opts ...Option) map[string]string {
	out := maps.Clone(headers)
	fields, drop := newConfig(opts).fit(ctx, headers)
	for _, k := range drop {
		delete(out, k)
	}
	if out == nil && len(fields) > 0 {
		out = make(map[string]string, len(fields))
	}
	for _, f := range fields {
		out[f[0]] = f[1]
	}
	return out
}

// AsynqMiddleware returns the tracing middleware of the asynq bridge
// (asynqfence): one consumer span per delivery, "attempt <task type>",
// whose parent is the trace context the task's headers carry (TaskHeaders),
// else the root of a new trace. Install it before the bridge's middleware,
// so its span covers the claim, the handler and the commit:
//
//	mux.Use(otelfencedq.AsynqMiddleware(), bridge.Middleware())
//
// A delivery that ran an attempt records what Middleware records of a
// native one (queue, job id, kind, attempt, token, outcome, the handler's
// error reduced as attemptError reduces it), and AttrRefused with an error
// status when the ledger refused the outcome as stale. A delivery that ran
// nothing (a duplicate, a busy or paused job, a refused task) records only
// the class of what the bridge returned (asynqfence.ErrBusy, ...), never
// its text, which names the job; its status is an error when the bridge's
// answer is a failure by asynqfence.IsFailure. Payloads are never recorded.
// Installed after the bridge's middleware, its span sees the attempt but
// not the commit: it records the handler's error only.
func AsynqMiddleware(opts ...Option) asynq.MiddlewareFunc {
	c := newConfig(opts)
	tracer := c.tracer()
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) (err error) {
			name, attrs := "attempt", []attribute.KeyValue{system, process}
			if jobs.ValidateKind(t.Type()) == nil {
				name += " " + t.Type()
				attrs = append(attrs, AttrKind.String(t.Type()))
			}
			start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
			parent := c.prop.Extract(ctx, propagation.MapCarrier(t.Headers()))
			if !trace.SpanContextFromContext(parent).IsRemote() {
				parent, start = ctx, append(start, trace.WithNewRoot())
			}
			inner, outer := asynqfence.AttemptFromContext(ctx)
			sctx, span := tracer.Start(parent, name, start...)
			sctx, report := asynqfence.WatchDelivery(sctx)
			taskID, _ := asynq.GetTaskID(ctx)
			returned := false
			defer func() {
				if r := recover(); r != nil {
					span.RecordError(errDeliveryPanicked)
					span.SetStatus(codes.Error, "delivery panicked")
					span.End()
					panic(r)
				}
				if !returned {
					err = errGoexit // the bridge committed the attempt first
				}
				if outer {
					// Inside the bridge: the attempt, not its commit.
					attemptAttrs(span, inner, taskID)
					if err != nil {
						span.RecordError(attemptError(err))
						span.SetStatus(codes.Error, "handler failed")
					}
					span.End()
					return
				}
				endDelivery(span, report, taskID, err)
			}()
			err = next.ProcessTask(sctx, t)
			returned = true
			return err
		})
	}
}

// errDeliveryPanicked is what a delivery's span records when the bridge,
// or a middleware between it and this one, panicked: asynq gets the panic.
var errDeliveryPanicked = errors.New("delivery panicked")

// attemptAttrs sets the attributes of attempt a on span. The job id is
// recorded as is when it is asynq's task id, else (an operation id names
// the job) digested as MessageID digests one.
func attemptAttrs(span trace.Span, a asynqfence.Attempt, taskID string) {
	id := a.ID
	if id != taskID {
		id = digest(id)
	}
	span.SetAttributes(destination(queueOf(a.Queue)), attribute.String("messaging.message.id", id),
		AttrAttempt.Int(a.Attempt), AttrToken.String(a.Token.String()))
}

// endDelivery ends a delivery's span with what the bridge reported, or
// (nothing ran) the class of err, what it returned to asynq.
func endDelivery(span trace.Span, report func() (asynqfence.Report, bool), taskID string, err error) {
	r, ok := report()
	if !ok || !r.Ran {
		if err != nil {
			span.RecordError(deliveryError(err))
			if asynqfence.IsFailure(err) {
				span.SetStatus(codes.Error, "delivery failed")
			}
		}
		span.End()
		return
	}
	attemptAttrs(span, r.Attempt, taskID)
	endCommitted(span, outcomeOf(r.State), r.Err, worker.Commit{Applied: r.Committed, Refused: r.Refused, State: r.State})
}

// errNotCommitted is what an attempt's span records when its outcome
// could not be committed (Redis unreachable): the job is reconciled
// before it runs again (by the maintenance leader once its lease expires,
// or by the asynq task's next delivery).
var errNotCommitted = errors.New("outcome not committed; the job is reconciled before it runs again")

// outcomeOf names the state an attempt's outcome leads to as
// worker.JobView.Outcome does.
func outcomeOf(s jobs.State) string {
	switch s {
	case jobs.Succeeded:
		return worker.OutcomeSucceeded
	case jobs.Dead:
		return worker.OutcomeDead
	case jobs.Uncertain:
		return worker.OutcomeUncertain
	case jobs.Cancelled:
		return worker.OutcomeCancelled
	}
	return worker.OutcomeRetry
}

// errDeliveryFailed is what a delivery's span records of a failure of no
// class deliveryError knows.
var errDeliveryFailed = errors.New("delivery failed")

// deliveryError is the class of err, what the bridge returned for a
// delivery that ran nothing: its text names the job (maybe by its
// operation id) and is not recorded.
func deliveryError(err error) error {
	for _, class := range []error{asynqfence.ErrBusy, asynqfence.ErrPaused, asynqfence.ErrNotClaimed, asynqfence.ErrConflict,
		asynqfence.ErrReview, asynqfence.ErrUncertain, asynqfence.ErrOptions, asynqfence.ErrNoAttempt, jobs.ErrInvalid,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, class) {
			return class
		}
	}
	return errDeliveryFailed
}
