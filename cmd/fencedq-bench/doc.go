// Command fencedq-bench measures fencedq side by side with plain asynq and
// with other Redis lock libraries, in one run against the same Redis, and
// prints a table (and, with --json, one JSON object).
//
// Sections (--sections, all by default, run in this order):
//
//	noop      drain --jobs pre-enqueued no-op jobs: a plain asynq server vs a
//	          fencedq worker.Pool, same concurrency, same Redis, at every
//	          --concurrency (default 10 and 50); jobs/s, the ratio fencedq ÷
//	          asynq (targets ≥ 2.0 at 10, ≥ 4.0 at 50) and, per job, round
//	          trips, scripts by name, INFO commandstats deltas, Redis and
//	          client CPU.
//	queues    the noop drain of one fencedq pool over one queue and over 100
//	          queues (jobs spread evenly, equal weights) at every
//	          --concurrency; ratio 100 queues ÷ one queue (target ≥ 0.9).
//	enqueue   --enqueue-jobs jobs from --enqueue-goroutines goroutines into an
//	          empty queue: asynq's Client.Enqueue vs jobs.Client.Enqueue
//	          (target ≥ 1.0) and jobs.Client.EnqueueMany in calls of
//	          --enqueue-batch jobs (target ≥ 5.0).
//	latency   --latency-rate jobs/s for --latency-duration offered to an idle
//	          asynq server and an idle fencedq pool: enqueue call to handler
//	          start, p50 / p99 / p99.9 / max (fencedq targets p50 ≤ 5 ms,
//	          p99 ≤ 50 ms).
//	cluster   the noop comparison with jobs spread over --cluster-queues
//	          queues, on a 3-master Redis Cluster and on the single server;
//	          ratio cluster ÷ single.
//	lease     acquire+release pairs per second from --lease-goroutines over
//	          --lease-resources resources (no contention): fencedq's
//	          lease.Manager vs github.com/bsm/redislock vs
//	          github.com/go-redsync/redsync/v4; ratios fencedq ÷ each
//	          (targets ≥ 1.0 and ≥ 1.5).
//	memory    Redis used_memory per retained succeeded job, minus the payload
//	          bytes: fencedq's ledger (without and with an OperationID) vs
//	          asynq with asynq.Retention (target ≤ 1.0), with MEMORY USAGE by
//	          key and the record's field sizes.
//	postgres  jobs that UPDATE one of 100 rows: plain asynq in autocommit vs
//	          fencedq through fence/pgfence (Store.ApplyBatch, one round
//	          trip, and Store.Apply beside it), target ≥ 0.8;
//	          skipped with a note when PostgreSQL (--pg, $DATABASE_URL, else
//	          postgres://postgres@127.0.0.1:5432/test) is unreachable.
//	bridge    the noop drain with a plain asynq server, without and with the
//	          asynqfence middleware (each delivery a fenced attempt in a
//	          ledger), same concurrency, same Redis: jobs/s, ratio bridge ÷
//	          asynq and cost per job; then the same with handlers that UPDATE
//	          one of 100 rows (--pg-jobs): plain in autocommit vs through
//	          pgfence.Store.Apply with the bridge's fence. No target.
//	outbox    --outbox-jobs jobs from --enqueue-goroutines goroutines through
//	          the PostgreSQL outbox (pgfence's Outbox.Enqueue, the code behind
//	          pgfence.Enqueue, one transaction per job; and EnqueueMany of
//	          --enqueue-batch jobs per transaction) vs jobs.Client.Enqueue;
//	          the relay's drain of the committed backlog by a fresh pool; and
//	          --outbox-rate jobs/s for --outbox-duration into an idle pool:
//	          tx.Commit to handler start (p50 / p99) beside plain Enqueue's
//	          Enqueue call to handler start. No target; skipped with a note
//	          when PostgreSQL is unreachable.
//	recovery  SIGKILL of a worker process mid-job until the job's handler
//	          starts again in a spare worker process, --kills times per
//	          variant (--recovery-modes: asynq, fencedq-2s, fencedq-5s, the
//	          fencedq lease TTL after the dash; maintenance interval 1s);
//	          fencedq target: every kill recovered within lease TTL + 1 s.
//	durable   the cost of durable acknowledgements (jobs.Durability with one
//	          replica, a replica of the single server the section starts):
//	          the noop drain at every --concurrency and Enqueue from
//	          --enqueue-goroutines goroutines, default vs durable; how much
//	          slower durable is (target ≤ 15 % at concurrency 50). Needs the
//	          benchmark's own server (not --redis).
//	workflows a chain of 10 no-op steps and a fan-out 1 → 100 → 1, each run
//	          --workflow-runs times (default 20) one at a time through one
//	          pool: time from workflow.Enqueue to the last step, steps/s,
//	          Redis commands and CPU per step, beside the same number of
//	          independent no-op jobs enqueued with one EnqueueMany.
//
// Every fencedq pool runs worker.Config's defaults (maintenance on) with the
// concurrency under test and a discarding logger; every asynq server runs
// asynq's defaults with a 100 ms task check interval.
//
// Every timed comparison runs --repeat times (default 3), alternating which
// side goes first, after an untimed warm-up; medians are reported.
//
// Without --redis the program starts its own redis-server processes on free
// loopback ports (no persistence), and without --cluster-addrs a 3-master
// cluster for the cluster section; it kills them, and every worker process,
// on exit and on SIGINT. The recovery section re-runs this executable with
// the hidden subcommand "worker".
//
// Other flags: --jobs (default 10000), --concurrency (10,50; every section
// but noop uses the first), --enqueue-jobs (jobs), --enqueue-goroutines (8),
// --enqueue-batch (100), --latency-rate (1000), --latency-duration (20s),
// --pg-jobs (jobs/2), --cluster-jobs (jobs/2), --memory-jobs (jobs/2),
// --outbox-jobs (jobs/2), --outbox-rate (200), --outbox-duration (10s),
// --lease-ops (20000), --recovery-timeout, --cpuprofile FILE, --quiet. See
// BENCHMARKS.md at the repository root for figures and how to read them.
package main
