// Command fencedq-bench measures fencedq side by side with plain asynq and
// with other Redis lock libraries, in one run against the same Redis, and
// prints a table (and, with --json, one JSON object).
//
// Sections (--sections, all by default, run in this order):
//
//	noop      drain --jobs pre-enqueued no-op jobs: a plain asynq server vs a
//	          fencedq worker.Pool, same concurrency, same Redis; jobs/s, the
//	          ratio fencedq ÷ asynq (target ≥ 0.85) and, per job, round trips,
//	          scripts by name, INFO commandstats deltas, Redis and client CPU.
//	cluster   the noop comparison with jobs spread over --cluster-queues
//	          queues, on a 3-master Redis Cluster and on the single server;
//	          ratio cluster ÷ single.
//	lease     acquire+release pairs per second from --lease-goroutines over
//	          --lease-resources resources (no contention): fencedq's
//	          lease.Manager vs github.com/bsm/redislock vs
//	          github.com/go-redsync/redsync/v4; ratios fencedq ÷ each
//	          (targets ≥ 1.0 and ≥ 1.5).
//	memory    Redis used_memory per retained succeeded job, minus the payload
//	          bytes: fencedq's ledger vs asynq with asynq.Retention.
//	postgres  jobs that UPDATE one of 100 rows: plain asynq in autocommit vs
//	          fencedq through fence/pgfence (Store.Apply); skipped with a note
//	          when PostgreSQL (--pg, $DATABASE_URL, else
//	          postgres://postgres@127.0.0.1:5432/test) is unreachable.
//	recovery  SIGKILL of a worker process mid-job until the job's handler
//	          starts again in a spare worker process, --kills times per
//	          variant (--recovery-modes: asynq, fencedq-2s, fencedq-5s, the
//	          fencedq lease TTL after the dash; reconciler interval 1s).
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
// Other flags: --jobs (default 10000), --concurrency (10), --pg-jobs
// (jobs/2), --cluster-jobs (jobs/2), --memory-jobs (jobs/2), --lease-ops
// (20000), --recovery-timeout, --cpuprofile FILE, --quiet. See
// BENCHMARKS.md at the repository root for figures and how to read them.
package main
