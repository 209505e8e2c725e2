// Package otelfencedq traces fencedq jobs with OpenTelemetry: a span for
// each enqueue and for each attempt, the attempt's span continuing the
// trace that enqueued the job.
//
// It is a module of its own (github.com/fencedq/fencedq/otelfencedq), so an
// application that does not trace never pulls OpenTelemetry in through
// fencedq. It is two middlewares, one per side (and AsynqMiddleware for the
// asynq bridge, below):
//
//	cfg := jobs.Config{Namespace: "fq", EnqueueMiddleware: []jobs.EnqueueMiddleware{otelfencedq.EnqueueMiddleware()}}
//	client := jobs.NewClient(rdb, cfg)
//	pool, _ := worker.NewPool(rdb, worker.Config{Jobs: cfg, Middleware: []worker.Middleware{otelfencedq.Middleware()}})
//
// # Spans
//
// The enqueue middleware starts a producer span per job, "enqueue <kind>",
// as a child of the span in the enqueue's context (an HTTP handler's, say),
// and writes that span's W3C trace context (traceparent, tracestate) into
// the job's headers before the write: each field that fits a job's header
// limits (jobs.ValidateHeaders; a caller's tracestate may not), so the trace
// context never gets an enqueue refused. The job record keeps its headers
// (jobs.Header): every claim of the job returns them, so the handler
// middleware's consumer span, "attempt <kind>", is a child of the enqueue
// span. Retries and operator re-runs of the job are claims of the same
// record, so every attempt is a child of the same enqueue span, in the same
// trace, told apart by its attempt number and token. A workflow's steps
// (workflow.Enqueue) pass through the client's enqueue middleware, so each
// step gets an enqueue span and its attempts continue it. The jobs a pool's
// maintenance leader enqueues (periodic ticks, outbox relays) go through
// the pool's jobs.Config.EnqueueMiddleware, so with this middleware there
// each gets an enqueue span of its own, the root of its trace, unless the
// job's headers carry a trace context: an enqueue without a span in its
// context starts its span under the one they carry, so an outbox row
// written with Headers(ctx) among its options continues the writer's
// trace. A job
// enqueued without a trace context (a raw enqueue from the CLI, a client
// without the middleware) starts a trace at its attempt. A deduplicated
// enqueue writes nothing,
// so its span is marked fencedq.job.deduplicated and the existing job's
// attempts stay in the trace that enqueued it.
//
// Why headers, not the payload: the args are the application's JSON, shown
// (redacted) to operators and decoded into its Go type, and a trace context
// is not part of them; a headers field is written by the enqueue script only
// when present, costs nothing to jobs without one, and carries any other
// context an application's own middleware needs (a tenant id).
//
// # Attributes
//
// Spans carry bounded attributes only: the messaging conventions'
// messaging.system ("fencedq"), messaging.operation.type ("send" or
// "process"), messaging.destination.name (the queue: a partitioned
// queue's, never the partition's) and
// messaging.message.id (the job id; a digest of an id that names its
// operation id, see MessageID), and fencedq.job.kind,
// fencedq.job.attempt, fencedq.job.token, fencedq.job.outcome (succeeded,
// retry, dead, uncertain or cancelled: what the ledger recorded, see
// below), fencedq.job.deduplicated and fencedq.job.refused. Args, operation ids, resources and owners are
// never recorded, nor a kind or queue name an enqueue refuses as invalid
// (its span is then named "enqueue"). A failed attempt's error is recorded as a span event (the
// text the ledger shows operators, except that a fence or lease error in
// it, which names the resource, owners or operation id, is recorded by its
// class: "debit: fence: stale token") and sets the span's status; a
// panic, or a handler that ends its goroutine (runtime.Goexit), is
// recorded as the retry the pool commits; one in a middleware after the
// handler returned leaves the handler's own outcome, which the pool
// commits and the span records (worker.JobView.HandlerResult). A failed
// enqueue's span records only the class of its error (jobs.ErrInvalid,
// jobs.ErrEnqueueUnknown, jobs.ErrNotSent, jobs.ErrWriteRefused, a
// context's end), never
// its text, which may quote the operation id or the
// resource it was refused for; the caller gets the whole error. An
// attempt whose handler the stopping pool abandons (still running past the
// shutdown, worker.JobView.AfterAbandon) has its span ended then, outcome
// uncertain, whatever the handler returns later.
//
// An attempt's span ends once the pool tried to commit its outcome
// (worker.JobView.AfterCommit), so the span tells what the ledger did with
// it: the state it recorded; or, for an outcome refused as stale (a newer
// attempt's token owns the job, its lease expired before the commit),
// fencedq.job.refused and an error status; or, for a commit that failed
// (Redis unreachable), an "outcome not committed" error, the outcome
// attribute then being the one the attempt asked for.
//
// Register the handler middleware first in worker.Config.Middleware, so
// its span covers the others and its outcome is the one their error leads
// to.
//
// # The asynq bridge
//
// AsynqMiddleware traces the deliveries of the asynq bridge (asynqfence),
// installed before the bridge's own middleware:
//
//	mux.Use(otelfencedq.AsynqMiddleware(), bridge.Middleware())
//
// Each delivery gets an "attempt <task type>" consumer span, a child of
// the trace context in the task's headers (write it with TaskHeaders:
// asynq.NewTaskWithHeaders(typ, payload, otelfencedq.TaskHeaders(ctx, nil))),
// with the attributes above and the outcome the bridge committed (through
// asynqfence.WatchDelivery); an outcome the ledger refused as stale sets
// AttrRefused and an error status. A job named by its operation id
// records a digest of it as messaging.message.id. A delivery that ran
// nothing (a duplicate, a busy or paused job) records no attempt, and of
// the bridge's error only its class.
package otelfencedq
