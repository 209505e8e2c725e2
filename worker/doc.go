// Package worker runs fencedq worker pools on asynq.
//
// A Pool is created from a redis.UniversalClient and a Config whose zero
// fields take documented defaults; workers are added with Register and Run
// blocks until its context ends, then shuts down gracefully.
//
//	pool, _ := worker.NewPool(rdb, worker.Config{Concurrency: 20})
//	worker.Register(pool, &TransferWorker{db: db})
//	pool.Run(ctx)
//
// # One delivery
//
// For each delivery asynq makes, the pool:
//
//  1. acquires the job's resource lease when the kind names a resource
//     (waiting up to LeaseWait; a busy resource defers the delivery);
//  2. claims the job in the ledger: pending becomes running with token T,
//     owner and deadline (the job's own lease when it names no resource);
//  3. runs the handler with a context carrying the fence (resource, T,
//     owner, operation id) that is cancelled the moment the lease is lost
//     and at the job's timeout, renewing the lease every LeaseTTL/3 until
//     then;
//  4. commits the outcome with T. A commit by a token that no longer runs
//     the job is rejected and counted (fencedq_fenced_rejections_total
//     {stage="commit"}); that attempt never reports success.
//
// # What the pool returns to asynq, and why asynq cannot override the ledger
//
//   - nil when the ledger reached succeeded or uncertain, when the delivery
//     was a duplicate (the job already succeeded, is dead, runs elsewhere,
//     is uncertain or in review) and when the commit was stale. asynq then
//     forgets the task; an uncertain job belongs to the reconciler.
//   - an error when the ledger scheduled a retry, so asynq redelivers after
//     RetryDelay; also when Redis failed before the claim.
//   - asynq.SkipRetry when the job is dead (permanent error, retries
//     exhausted, unknown kind, malformed payload) or the delivery names no
//     job, so asynq archives the task.
//   - an internal "deferred" error when the resource is busy: asynq does not
//     count it as a failure and redelivers within half a second.
//
// asynq's own lease is unfenced: a stale worker's late Done is accepted and
// a task may be delivered twice. That cannot change an outcome, because
// every delivery first claims the job in the ledger (a succeeded or dead job
// is acknowledged without running the handler) and every outcome is
// committed by token. asynq's retry count mirrors the ledger's attempts (the
// same MaxRetries), but the ledger decides when a job is dead.
//
// # Timeouts and uncertainty
//
// A deadline does not prove failure: when a handler returns an error after
// its timeout passed, after its lease was lost, or during shutdown, the job
// becomes uncertain, not failed. A handler that returns nil succeeded,
// however late. A worker whose side effects are safe to repeat can opt for
// plain retries on timeout by implementing RetryOnTimeout() bool. A handler
// that ignores its context keeps its slot, but its lease lapses at the
// deadline, the reconciler takes over, and its eventual commit is fenced.
//
// # The reconciler
//
// Every pool runs a reconciler (unless Config.Reconciler.Disabled); only
// the namespace's leader, elected with a fenced lease, acts, and its ledger
// writes carry its token, so a reconciler paused past its leadership is
// refused. Every Interval (default 1s) it moves running jobs whose lease
// deadline passed to uncertain, then resolves each uncertain job: it asks
// the worker's Reconcile if it has one, else the Config.Reconciler.EffectLog
// (a fence store's effect log); applied becomes succeeded, not applied is
// re-run with a fresh delivery and, on its next attempt, a higher token;
// "cannot tell" is asked again with backoff and, after MaxTries (or when
// nothing can be asked), goes to review for an operator
// (jobs.Client.Resolve). Crash recovery therefore takes about LeaseTTL +
// Interval, not asynq's one-minute recoverer.
//
// A worker can also die after asynq handed it a delivery but before the
// claim (while it waits for a busy resource's lease, say). The job is still
// pending and its delivery sits "active" in asynq, which would hand it out
// again only after its 30 s task lease and its one-minute recoverer. Every
// ten scans the reconciler lists each queue's active deliveries (as many as
// its workers are busy, whatever the backlog) and compares them with the
// tasks live asynq servers report (a dead server's report lapses within two
// heartbeats, 10 s). A pending job whose current delivery no live server
// has listed for another heartbeat gets a new delivery under a new task id
// (history: a "rerun" resolution from pending; metric result
// "redelivered"). If the orphan is ever delivered again, its claim finds
// the job taken and it is acknowledged.
//
// # Metrics and logs
//
// Metrics are registered on Config.Registerer (never the global registry)
// with names prefixed fencedq_ and labels from bounded sets only. Every job
// log line carries job_id, operation_id, kind, queue, attempt and token;
// args are never logged.
package worker
