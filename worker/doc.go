// Package worker runs fencedq worker pools.
//
// A Pool is created from a redis.UniversalClient and a Config whose zero
// fields take documented defaults (the Default* constants); workers are
// added with Register and Run blocks until its context ends, then shuts
// down gracefully.
//
//	pool, _ := worker.NewPool(rdb, worker.Config{Concurrency: 20})
//	worker.Register(pool, &TransferWorker{db: db})
//	pool.Run(ctx)
//
// End that context on SIGTERM as well as SIGINT: docker stop, Kubernetes
// and systemd send SIGTERM. Once it ended, let a second signal end the
// process at once, as a user pressing Ctrl-C again expects (stop restores
// the signals' default action):
//
//	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	context.AfterFunc(ctx, stop)
//
// The shutdown puts back the jobs
// claimed but not started, waits up to ShutdownTimeout for running
// handlers, cancels those still running and commits every outcome within
// ShutdownTimeout plus ShutdownGrace, so give the process manager a kill
// timeout longer than that.
//
// # How a pool runs jobs
//
// The pool has four parts:
//
//   - the producer is the fetch loop: one fenced claim
//     call per queue takes up to min(free slots, FetchBatch) due jobs and
//     starts an attempt on each (running, token T, owner, deadline). Queues
//     are visited by priority (StrictPriority) or in a random order weighted
//     by priority; only queues that may have due work are claimed (a queue
//     whose claim found nothing waits for a wake-up naming it, its next due
//     time, or the idle look, one pipelined read of the earliest due time of
//     every such queue per FetchPollInterval: an idle queue costs no claim).
//     An idle pool sleeps until an enqueue publishes a wake-up on the
//     queue's channel, until the next scheduled job is due, or for
//     FetchPollInterval, whichever comes first. After a claim that got
//     all it asked for, it lets the executors it woke run before it counts
//     the free slots again, so the next claim takes the slots they freed;
//   - the executor runs one attempt: when the
//     kind names a resource it first takes that resource's lease (waiting
//     up to LeaseWait; a busy resource puts the job back, due a little
//     later, without consuming an attempt), then calls the handler with a
//     context carrying the fence (resource, token, owner, operation id)
//     that is cancelled the moment a lease is lost, at the job's timeout,
//     or when an operator cancels the job;
//   - the renewer renews every running attempt every
//     LeaseTTL/3: one ledger call per queue for all its attempts, and the
//     resource leases through the lease manager, whose concurrent calls
//     share pipelines. An attempt whose leases were not all confirmed by
//     its local deadline (the send time of the last confirmed claim or
//     renewal + LeaseTTL - SafetyMargin) has its handler's context
//     cancelled, cause matching lease.ErrLost, even if Redis is
//     unreachable;
//   - the completer commits outcomes in batches: whatever
//     arrived while its previous call was in flight goes in the next, one
//     call per queue, each outcome applied only if its token still runs the
//     job. A slot frees as soon as its outcome is handed over. A commit by a
//     token that no longer runs the job is rejected and counted
//     (fencedq_fenced_rejections_total{stage="commit"}); that attempt never
//     reports success.
//
// How a handler call ended maps to the outcome through one pure function,
// shared with the asynq bridge.
//
// # Middleware
//
// Config.Middleware wraps every handler call, the first outermost:
// logging, tracing (github.com/fencedq/fencedq/otelfencedq), a panic
// policy, a tenant's context. A Middleware gets the next Handler and
// returns one; each call sees the handler's context (fence, deadline,
// cancellation) and a JobView of the job (kind, queue, id, operation id,
// attempt, token, owner, deadline, headers; never the args), and the
// error the handler returned, which it may replace. JobView.Outcome says
// what that error leads to (succeeded, retry, dead, uncertain,
// cancelled). The chain is built once per kind at Register, so a pool
// without middleware pays nothing for it.
//
//	func logged(next worker.Handler) worker.Handler {
//		return func(ctx context.Context, job worker.JobView) error {
//			err := next(ctx, job)
//			slog.InfoContext(ctx, "attempt", "kind", job.Kind(), "attempt", job.Attempt(), "outcome", job.Outcome(err))
//			return err
//		}
//	}
//	pool, _ := worker.NewPool(rdb, worker.Config{Middleware: []worker.Middleware{logged}})
//
// # Timeouts and uncertainty
//
// A deadline does not prove failure: when a handler returns an error after
// its timeout passed, after its lease was lost, or during shutdown, the job
// becomes uncertain, not failed. A handler that returns nil succeeded,
// however late. A worker whose side effects are safe to repeat can opt for
// plain retries on timeout, and when a shutdown cancels it mid-call, by
// implementing RetryOnTimeout() bool. A handler
// that ignores its context keeps its slot, but its lease lapses at the
// deadline, the maintenance leader takes over, and its eventual commit is
// fenced.
//
// # The maintenance leader
//
// Every pool competes to be the namespace's maintenance leader (unless
// Config.Maintenance.Disabled); only the leader, elected with a fenced
// lease, acts, and its ledger writes carry its token, so a leader paused
// past its lease is refused. It runs small services, each on its own
// interval: the expirer moves running jobs whose lease deadline passed to
// uncertain (every Maintenance.Interval, default 1s); the resolver
// reconciles uncertain jobs: it asks the worker's Reconcile if it has one,
// else Config.Maintenance.EffectLog (a fence store's effect log): applied
// becomes succeeded, not applied is a failed attempt (retried after
// Config.RetryDelay, its next attempt with a higher token, while MaxRetries
// allows, else dead), "cannot tell" is asked again with backoff and, after
// MaxReconcileTries (or when nothing can be asked), goes to review for an
// operator (jobs.Client.Resolve); the pruner removes index entries of
// finished jobs past retention; a status service publishes job counts; the
// periodic service enqueues the ticks of periodic jobs (AddPeriodic; off
// with Maintenance.PeriodicDisabled); one relay per outbox moves committed
// jobs into the queue (Maintenance.Outboxes). Crash recovery takes about
// LeaseTTL + Interval. A Reconcile that panics, a corrupt record, or index
// entries whose record is gone are logged and counted, and never stop the
// other jobs' passes; after Redis lost every key the leader is elected
// again and pools and clients register their queues again.
//
// # Cancelling and pausing
//
// jobs.Client.Cancel makes a pending job cancelled at once; for a running
// job it sets a flag that the next renewal reports, and the pool cancels
// the handler's context. The attempt's outcome is still committed by its
// token: a retry becomes cancelled, a success stays a success, an unknown
// outcome (a timeout that does not prove failure included) stays uncertain,
// and ends cancelled if the reconciler finds it not applied. A paused queue (jobs.Client.Pause) is skipped by
// every claim; its running attempts finish.
//
// # Redis failovers
//
// With Config.Jobs.Sentinel set (the options of the redis.NewFailoverClient
// the pool runs on), every token the pool mints (claims, resource leases,
// the maintenance leader's lease) carries the Sentinels' failover epoch:
// tokens minted after a failover are above every token minted before it,
// whatever the promoted node's clock says; without it the epoch is counted
// in Redis. When a handler's write is still refused by storage with a
// token the ledger lost (a fence.StaleError for the attempt's own fence),
// the pool raises the job's (or the resource's) counter above storage's
// mark before committing the retry, so the next attempt is accepted.
//
// With Config.Jobs.Durability the pool's claims, completions and resource
// leases wait for replicas (jobs.Durability), and so do its maintenance
// leader's enqueues (periodic ticks, outbox relays: a relayed row leaves
// its outbox only once its job is acknowledged). A claim too few replicas
// acknowledged is never started: its jobs are put back pending, their
// attempt not consumed (or come back when their leases expire); a
// completion too few acknowledged is retried.
//
// Every claim and completion also checks the ledger for a rewind (a Redis
// that came back with older data, having lost acknowledged writes): it is
// logged at error level, counted (fencedq_ledger_rewinds_total) and
// recorded for the dashboard. On every heartbeat (every few seconds, busy
// or idle) the pool measures Redis's clock against its own: the offset is
// exported (fencedq_redis_clock_offset_seconds), published in the heartbeat
// (the dashboard's pools page, fencedq pools) and logged when beyond
// jobs.ClockOffsetWarn by more than half the measurement's round trip; a jump of Redis's clock backwards is logged at
// error level and counted (fencedq_redis_clock_jumps_total).
//
// # Metrics and logs
//
// Metrics are registered on Config.Registerer (never the global registry)
// with names prefixed fencedq_ and labels from bounded sets only. Every job
// log line carries job_id, operation_id, kind, queue, attempt and token;
// args are never logged.
package worker
