// Command fencedq-chaos proves fencedq's promise under faults: it runs the
// bank example's transfer jobs in several worker processes while a nemesis
// pauses, kills and restarts things, then checks the storage and the
// ledger.
//
// One run:
//
//  1. starts its own redis-server (from PATH; AOF on, appendfsync always)
//     on a free loopback port in a temporary directory, and creates a fresh
//     schema in PostgreSQL (--database-url, else $DATABASE_URL, else
//     postgres://postgres@127.0.0.1:5432/test?sslmode=disable), dropped at
//     the end unless --keep;
//  2. starts --workers worker processes (this binary re-executed with the
//     hidden `worker` command), each running bank.Worker over
//     bank.PostgresStore in a fencedq pool (which claims jobs from the
//     ledger itself: asynq runs only in the baselines), and each talking to PostgreSQL
//     through its own TCP proxy on loopback; the first --careless workers
//     make their storage calls ignore the handler's cancellation (a handler
//     or driver that does not honour its context), so that a worker paused
//     past its lease wakes up and writes anyway, and only the fence stops it;
//  3. for --duration, submits --rate transfers per second among --accounts
//     accounts: some are duplicate submissions of an earlier operation id
//     (--dup; half of them concurrent), some operations are also submitted
//     to a second queue (--priority-copies), some cannot be covered and
//     must end dead (--overdrafts);
//  4. meanwhile a nemesis, at random and repeatedly (at least one of each
//     kind first, then up to the --max-* counts, one fault every
//     ~--fault-gap per lane):
//     - pause: SIGSTOP a worker for 1.5-3 lease TTLs, then SIGCONT;
//     - kill: SIGKILL a worker and start a new one in its slot;
//     - redis-restart: kill (SIGKILL or SIGTERM) redis-server and start it
//     again on the same port and directory (the AOF keeps its data);
//     - stall: hold every PostgreSQL answer to one worker (sometimes all)
//     for longer than the handler timeout, so calls time out after the
//     database applied them (queries still flow: a COMMIT applies, its
//     answer comes late);
//     - slow: add 100-500ms to every PostgreSQL answer for a few seconds;
//     - long-pause (only with --long-pauses): SIGSTOP a worker for
//     --long-pause, past asynq's own 30s lease and its recoverer;
//  5. stops the faults, lets the system settle (until no job is pending,
//     running or uncertain, at most --drain), stops the workers and runs
//     the checker.
//
// The checker verifies that money is conserved and every balance equals
// its replay from the balance-change log; that every transfer's effect was
// applied exactly once (the pgfence effect log, a trigger-written
// acceptance log and the balance changes agree, transaction by
// transaction); that per account the accepted tokens never decrease and no
// two owners share one; that every enqueued operation id ends succeeded, or
// dead or in review with a recorded reason (none lost, none left pending,
// running or uncertain); and it counts fenced rejections, deduplications,
// uncertain jobs and how they were resolved, and the faults. It prints a
// table, or with --json one JSON object, and exits 1 on any violation.
//
// --baseline asynq runs the same workload and faults with a plain asynq
// handler (asynq.NewServerFromRedisClient, asynq.Client with TaskID and
// Retention for deduplication, asynq's own lease) doing unfenced debits and
// credits, and reports the double applies, stale writes and lost transfers
// it finds instead of failing (exit 0 unless the run itself broke).
//
// --baseline asynq-bridge runs the same workload and faults on the same
// asynq servers, client, queues, retries and lease as the baseline, with
// the transfer handler being bank.Worker over the fenced
// bank.PostgresStore under the asynqfence middleware: each delivery is a
// fenced attempt in the ledger (the job is the operation id, carried in
// the task's asynqfence.OperationHeader), the pgfence effect log is the
// bridge's evidence for a redelivered task whose attempt ended without a
// commit, and no fencedq pool runs. It is checked like fencedq (effects,
// tokens, every job succeeded, dead or in review; its effects are fenced
// by the job's own token, "job:<operation id>") and fails on a violation.
// A killed or long-paused server's task waits for asynq's recoverer (30-90
// s), so the drain takes that long after such a fault.
//
// --failover runs Redis as a deployment that fails over: two redis-servers
// (AOF, appendfsync always; one the primary, one its replica) and a
// Sentinel (quorum 1, down-after 2s), all on free loopback ports; the
// driver and every worker connect with redis.NewFailoverClient through the
// Sentinel. The nemesis gains a Redis lane (one fault every ~--failover-gap)
// that SIGKILLs the primary with the replica in sync (healthy), with the
// replica cut off from it 3-5s before (lagging: what the primary
// acknowledged meanwhile is lost), or cut off and with the replica's wall
// clock shifted by --clock-offset through an LD_PRELOAD shim compiled with
// cc (clock); after the Sentinel's promotion the killed node restarts as a
// replica of the new primary and resynchronises, so failovers can go on.
// Redis restarts then restart the replica. The checker adds: acknowledged
// jobs lost (counted and reported; with --durable, violations), accepted
// tokens never below an earlier accepted token of the same resource, no
// resource refused by the storage for longer than a lease TTL plus the
// longest failover, and what each failover cost (how long no write was
// accepted, the slowest account to see a write again). It works with every
// --baseline.
//
// --cluster N runs Redis as a Redis Cluster of N masters (AOF each, no
// replicas), which the driver and every worker reach with
// redis.NewClusterClient; Redis restarts then restart one master at a time.
// --partitions P declares the workload's two queues with P partitions
// (Client.SetPartitions) before the workers start, so every job lives in
// the partition its operation id routes it to, and the checker reads it
// there. On a cluster a job's token and its account lease's token are
// minted on two masters, each in its own fencing epoch, so the checker
// names an effect's writer by its owner alone. Both run fencedq only.
//
// --cluster N --failover gives each master one replica (AOF) and fails
// masters over in the Redis lane: a SIGKILL of a master, then its
// replica's promotion by CLUSTER FAILOVER FORCE (TAKEOVER if the election
// stalls), the same with the replica cut off 3-5s before the kill, and a
// coordinated CLUSTER FAILOVER (--failover-faults kill,lagging,coordinated). Each waits until every live node routes the slots to
// the promoted node; a killed master then restarts and rejoins as its
// replica. Redis restarts restart a replica. The checker applies the
// failover rules above: acknowledged jobs lost only in a failover's loss
// window (counted as findings, and seen as rewinds), none with --durable.
//
// Everything listens on loopback. Exit codes: 0 clean, 1 violation or
// broken run, 2 bad usage.
//
// Usage:
//
//	fencedq-chaos [flags]
//
//	--duration 3m            how long faults and submissions go on
//	--rate 20                transfer submissions per second
//	--accounts 20            bank accounts (1,000,000 cents each)
//	--workers 4              worker processes
//	--concurrency 4          jobs per worker process
//	--careless 1             workers whose storage calls ignore cancellation
//	--lease-ttl 1.5s         lease TTL of every attempt
//	--handler-timeout 2s     handler timeout
//	--reconcile-interval 500ms
//	--dup 0.1                fraction of submissions that are duplicates
//	--priority-copies 0.02   fraction of operations also sent to a second queue
//	--overdrafts 0.01        fraction of transfers that cannot be covered
//	--limit-per-account 0    concurrency limit of transfers into one account
//	                         (jobs.Limit; 0: none); the checker adds "never more than N holders"
//	--rate-limit 0           transfer starts per second (jobs.Rate; 0: none); the
//	                         checker adds "rate never exceeded"
//	--workflows              each operation as a workflow: transfer, ledger entry,
//	                         notification (fencedq on one server only); the checker
//	                         adds each step once, in order, and every workflow final
//	--fault-gap 2s           mean pause between faults in each nemesis lane
//	--max-pauses, --max-kills, --max-redis-restarts, --max-stalls, --max-slowdowns
//	                         per-kind fault limits (default 1000; 0 disables)
//	--long-pauses 0          pauses past asynq's lease (see --long-pause 75s)
//	--drain 3m               longest wait for the system to settle
//	--seed 0                 random seed (0: from the clock; printed)
//	--baseline asynq         run the unfenced asynq baseline instead
//	--baseline asynq-bridge  run asynq servers with the asynqfence middleware instead
//	--failover               primary + replica + Sentinel, and failover faults
//	--failover-faults healthy,lagging,clock
//	                         (with --cluster: kill,lagging,coordinated)
//	--max-failovers 1000     per failover kind (0 disables)
//	--failover-gap 10s       mean pause between two faults of the Redis lane
//	--clock-offset -120s     the promoted node's clock shift in clock failovers
//	--durable                durable acknowledgements (jobs.Durability, one replica) for fencedq
//	                         and the bridge; an acknowledged job lost is a violation
//	--cluster N              a Redis Cluster of N masters (fencedq only);
//	                         with --failover, one replica each and master failovers
//	--partitions P           the workload's queues with P partitions (fencedq only)
//	--pg-idle-in-transaction 0
//	                         the workers' PostgreSQL idle_in_transaction_session_timeout
//	                         (0: off): a frozen worker's transaction is aborted, its row
//	                         locks released
//	--json                   print the report as one JSON object
//	--keep                   keep the schema, Redis directory and worker logs
//	--database-url URL       PostgreSQL (default $DATABASE_URL or the URL above)
//	--log-level warn         worker log level (logs go to files in the run directory)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fencedq/fencedq/internal/cli"
	"github.com/redis/go-redis/v9"
)

// errUsage marks bad flags or arguments (exit code 2).
var errUsage = errors.New("usage")

// errViolation marks a run whose checker found violations (exit code 1).
var errViolation = errors.New("the checker found violations")

func main() {
	ctx, stop := cli.SignalContext("fencedq-chaos", os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(quietLogger{}) // connection errors during Redis restarts are expected
	var err error
	if len(args) > 0 && args[0] == "worker" {
		err = workerMain(ctx, args[1:], stderr)
	} else {
		err = chaosMain(ctx, args, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "fencedq-chaos:", err)
		return 2
	}
	fmt.Fprintln(stderr, "fencedq-chaos:", err)
	return 1
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
