// Package asynqfence runs the handlers of an existing asynq server as fenced
// attempts in a fencedq ledger: the asynq bridge.
//
// Tasks are still enqueued with a plain asynq.Client (or asynq's Scheduler)
// and delivered by asynq servers; the bridge goes first on their mux:
//
//	mux := asynq.NewServeMux()
//	mux.Use(asynqfence.Middleware(rdb, jobs.Config{Namespace: "fq"}, asynqfence.Options{}))
//	mux.HandleFunc("invoice:send", sendInvoice) // fence.FromContext(ctx): the attempt's token
//	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: queues, IsFailure: asynqfence.IsFailure})
//	err := srv.Run(mux)
//
// The bridge's middleware (Middleware, or Bridge.Middleware with
// asynq.ServeMux.Use) turns each delivery into an attempt in the ledger
// (the ledger's bridge claim):
//
//   - The job is the task's operation id (the OperationHeader header, see
//     NewTask) or else asynq's task id. Its record is created on first sight
//     (kind, payload, operation id), marked bridged (jobs.Record.Bridge is
//     "asynq"), and listed by the dashboard and the CLI like any job. On a
//     partitioned ledger queue (jobs.Client.SetPartitions) it goes to the
//     partition a native enqueue of its operation id goes to, or stays in
//     the one already holding it; like a native client, the bridge reads
//     the queue's partitions again every jobs.PartitionRefresh.
//   - The attempt gets a fencing token higher than any before it. The
//     handler's context carries it: fence.FromContext (for fence/pgfence,
//     fence/redisfence, fence/httpfence), lease.FromContext and
//     AttemptFromContext. Handler adapts a fencedq jobs.Worker[T].
//   - While the handler runs, the bridge renews the attempt's ledger lease
//     (Options.LeaseTTL) and cancels the handler's context, with a cause
//     matching lease.ErrLost, once the lease is lost or no renewal was
//     confirmed by its local deadline (Options.SafetyMargin before the end
//     of the lease as measured from the send time of the last confirmed
//     claim or renewal).
//   - The outcome is committed with the attempt's token (the ledger's fenced completion):
//     a stale attempt's outcome is refused and changes nothing.
//
// A delivery of a task whose previous attempt ended without a commit (a
// crashed or paused server whose task asynq's recoverer handed out again, a
// retry after asynq's timeout) does not run the handler blindly. The bridge
// asks the kind's Reconcile (a handler implementing TaskReconciler, or
// Options.Reconcile), else the effect log (Options.EffectLog, e.g. a
// pgfence.Store), and decides as the native reconciler does, with the same
// evidence in the job's history and the same metrics: applied (succeeded;
// the delivery is acknowledged), not applied (the handler runs under a new,
// higher token), or cannot tell (asynq delivers the task again later and the
// bridge asks again; after Options.MaxReconcileTries answers the job goes to
// review). A delivery of a job that already succeeded (or is dead or
// cancelled) is acknowledged without running the handler and counted as
// deduplicated.
//
// What the handler returns to asynq:
//
//   - nil: succeeded; a duplicate; an outcome refused as stale once the
//     job is final (or, for a success or a cancellation, its record is
//     gone); an uncertain job reconciled as applied.
//   - an error matching ErrGone: the ledger lost the job (a rewind) under
//     an attempt that failed or ended uncertain; asynq retries the task,
//     and its next delivery records the job afresh.
//   - an error matching ErrSuperseded: an outcome refused as stale while
//     the job is unfinished; asynq keeps the task, and its next delivery
//     finds the job busy, final, or expired and reconciled first.
//   - an error matching ErrUncertain: the outcome is unknown; asynq retries
//     the task and its next delivery is reconciled first.
//   - ErrBusy, ErrPaused, ErrNotClaimed (the ledger's claim failed), or
//     the handler's error: asynq retries the task. Each retry counts
//     against the task's retry limit, unless the server's
//     asynq.Config.IsFailure is IsFailure, which spends none on the first
//     three (the delivery did not run); a job whose task asynq archives
//     meanwhile is given a new one by Redeliver (a job first delivered to a
//     paused queue is recorded, pending, for that purpose).
//   - the handler's error wrapping asynq.SkipRetry or asynq.RevokeTask: the
//     job is dead (asynq archives or drops the task, as the handler said).
//   - an error wrapping asynq.SkipRetry: the job is dead, cancelled, held for
//     review (ErrReview), or its id belongs to a native job (ErrConflict).
//     asynq archives the task. After an operator re-runs a job in review
//     (fencedq CLI or dashboard), run the archived task again in asynq
//     (asynqmon or asynq.Inspector.RunTask): that delivery claims it.
//
// A handler that panics is committed as a retry (counted in
// fencedq_handler_panics_total). So is one that ends its goroutine
// (runtime.Goexit, as t.FailNow does), logged with the job id; asynq then
// gets no answer and delivers the task again once its timeout passes.
//
// A middleware installed before the bridge's learns what it did with a
// delivery through WatchDelivery: whether an attempt ran, its token, the
// outcome and whether the ledger applied or refused it (otelfencedq's
// AsynqMiddleware traces deliveries so).
//
// # Limits and metrics
//
// A task is refused as jobs.Client.Enqueue refuses a job: a payload over
// jobs.MaxPayloadBytes, a task type that is not a valid kind, a ledger
// queue or operation id outside the names' rules, or a job id (operation id
// or task id) starting with "=", the ledger's name for the job of a native
// operation id ("=<queue>=<operation id>"), is answered with an
// error matching jobs.ErrInvalid and wrapping asynq.SkipRetry (asynq
// archives the task), counted as rejected (reason invalid) and logged
// with the task id (its names cut), before the ledger records anything or
// the handler runs. So is a task whose type is not the kind of the bridged
// job it names (by JobHeader, its operation id or its task id): logged
// with both kinds and ids, it leaves that job as it was.
//
// Options.Registerer gets the series native pools export (but those only
// pools set: the maintenance leader's, Redis's clock and eviction policy),
// with labels from bounded sets only. The kind label is the handler's, never a
// task type chosen by whoever enqueues: the worker kind of a Handler; the
// pattern that handles the task when the middleware wraps a whole
// ServeMux; UnknownKind ("unknown", as native pools label kinds no worker
// is registered for) for a type no handler matches; otherwise (a plain
// handler under ServeMux.Use, which may serve a prefix pattern) the type,
// for the first MaxKindLabels types a bridge sees, and UnknownKind after.
// A queue the ledger refuses is labelled "invalid".
//
// # What asynq still decides, and what the bridge decides
//
// asynq's own guarantees are unchanged. A server holds a task under asynq's
// 30 second lease, extended by its heartbeat; when a server goes silent
// (crashed, paused, cut off), asynq's recoverer, which looks once a minute
// for leases expired at least 30 seconds ago, hands the task out again.
// asynq's retries, their delays, its timeouts and its archive work as
// before. So asynq still decides when a task is delivered, and may deliver
// it while a paused server still runs it: asynq is at-least-once.
//
// The bridge decides whether a delivery's effect may happen. Each attempt's
// token is higher than the previous one's, so once a newer attempt has
// written through a fenced store, a paused server that wakes up and writes
// with its old token is refused there (fence.ErrStale), and its outcome is
// refused by the ledger. A redelivered task whose effect already happened
// is recognised (Reconcile or the effect log) and acknowledged instead of
// applied twice. The guarantee holds for effects written through a fenced
// store or checked by Reconcile; an effect the bridge cannot see (an email
// sent without an operation id) can still happen twice, as with asynq alone.
//
// A bridged job waiting for its next delivery (after a retry or a re-run) is
// pending in the ledger but never in the native due index: native pools
// serving the same queue never claim it. The native reconciler, when a pool
// runs in the namespace, expires and reconciles bridged attempts like any
// other; without one, the bridge does both when asynq redelivers the task.
//
// # Jobs whose task is gone
//
// A bridged job moves only when asynq delivers its task. When asynq holds
// no live task for an unfinished job (a Redis failover rewound asynq's
// record of it, or asynq archived it after retries that found the job busy
// or uncertain), Bridge.Redeliver enqueues a new one (JobHeader names the
// job; it carries the headers of the job's first task, trace context
// included, which the ledger keeps); run Bridge.Run beside the asynq server to do so every
// Options.RedeliverInterval. Its delivery reconciles the job before
// anything runs, as any redelivery does. To drop a bridged job, cancel it
// in the ledger (fencedq CLI or dashboard): deleting its asynq task alone
// makes Redeliver enqueue a new one.
//
// Across Redis failovers the bridge behaves as pools do: with the
// jobs.Config's Sentinel set, its tokens carry the Sentinels' failover
// epoch; a storage refusal of an attempt's own fence raises the job's next
// token above storage's mark; and its completions check the ledger for a
// rewind (logged, counted in fencedq_ledger_rewinds_total, recorded).
package asynqfence
