// Package jobs defines fencedq jobs and owns the ledger, the source of
// truth for every job's state.
//
// # Defining a job
//
// A job kind is a Go type whose Kind method names it; its value is the
// job's arguments, stored as JSON:
//
//	type Transfer struct {
//		From, To string
//		Cents    int64
//		Memo     string `fencedq:"sensitive"` // redacted in logs, CLI, dashboard
//	}
//
//	func (Transfer) Kind() string { return "transfer" }
//
// Optional methods add capabilities: Validate() error rejects bad args
// before anything is written; Resource() string names the resource each
// attempt leases (default: the job itself), so jobs touching the same
// account exclude and fence each other.
//
// A worker handles one kind (see package worker to register it):
//
//	type TransferWorker struct{ db *pgxpool.Pool }
//	func (w *TransferWorker) Work(ctx context.Context, j *jobs.Job[Transfer]) error
//
// Work receives decoded args and the attempt's fencing token (j.Token; also
// in ctx as a fence.Fence). Its result steers the outcome: nil succeeds; an
// error is retried (RetryAfter(err, d): after d); Permanent(err) goes to
// dead; Unknown(err) says the side effect may or may not have happened and
// makes the job uncertain, to be reconciled rather than guessed. A worker that can find out what
// happened implements Reconcile (the Reconciler interface).
//
// # Enqueueing
//
// Client.Enqueue validates everything first (an invalid job writes
// nothing), then one script call writes the job record, its operation id
// and its place in the queue's due index, and wakes idle pools.
// Client.EnqueueMany validates a whole slice and sends it in one pipeline.
// An enqueue given a known OperationID returns the existing job with
// Result.Deduplicated set and writes nothing new; operation ids are unique
// per queue and remembered for the retention period. A job enqueued
// without one uses its own id.
//
// # Partitioned queues
//
// Client.SetPartitions declares a queue with P partitions, each a whole
// queue in its own Redis Cluster hash slot, spread over the masters. P is
// an entry of the namespace's partition registry that clients and pools
// read (again every PartitionRefresh), not an option, so the enqueuers and
// the pools agree. An enqueue goes to the partition of its PartitionKey
// (or the args' Partitioner), else of its operation id (so operation ids
// deduplicate across the partitions), else the jobs are spread evenly;
// Result.Partition names it. Reads and operator actions take the queue's
// name and cover every partition (Inspector.Partitions breaks it down);
// a job's Record.Queue is its partition's name, which they accept too.
// Changing P sends new jobs to the new layout while pools drain the old
// one.
//
// # Headers and enqueue middleware
//
// Header attaches short strings to a job beside its args (a trace
// context, a tenant id); the job record keeps them and every attempt sees
// them (Job.Headers, and worker middleware). Config.EnqueueMiddleware
// wraps every enqueue of a Client: each middleware sees the jobs about to
// be written (EnqueueRequest: the kind, the args, and the options resolved
// over their defaults, which it may amend), calls the next, and sees the
// results and the error. An EnqueueMany batch passes through once, so it
// keeps its single round trip; requests are validated after the last
// middleware, so an amendment out of bounds is refused like an option. The
// tracing module github.com/fencedq/fencedq/otelfencedq is such a
// middleware.
//
//	func tenancy(next jobs.EnqueueFunc) jobs.EnqueueFunc {
//		return func(ctx context.Context, reqs []*jobs.EnqueueRequest) ([]*jobs.Result, error) {
//			for _, r := range reqs {
//				r.SetHeader("tenant", tenantOf(ctx))
//			}
//			return next(ctx, reqs)
//		}
//	}
//	client := jobs.NewClient(rdb, jobs.Config{EnqueueMiddleware: []jobs.EnqueueMiddleware{tenancy}})
//
// # The ledger is the queue
//
// Ledger keeps, per job: kind, operation id, state, current token and
// owner, lease deadline, attempt count, redacted args and, beyond the common
// path (enqueued, one attempt, succeeded), a history of attempts and
// decisions. The pending index, scored by due time, is the queue: Claim
// takes up to N due jobs in one script call and mints each attempt's token
// there, so claiming a job for delivery is the fenced claim. Renew and
// Complete take batches, each entry applied only if its token still runs
// the job. Every transition of the state machine (pending, running,
// succeeded, dead, cancelled, uncertain, review) is one Lua script, and
// every script touches one queue's hash slot, so the ledger runs on a
// single Redis, Sentinel and Redis Cluster. Operators cancel jobs, pause
// and resume queues, and resolve or re-run jobs through Client.
//
// # Across Redis failovers
//
// Give Config.Sentinel the options of the redis.NewFailoverClient the
// client is built on (and the same Config to pools and the asynq bridge):
// job tokens, like lease tokens, carry a failover epoch, so a token minted
// after a failover is above every token minted before it, whatever the
// promoted node's clock says.
//
// Redis replication is asynchronous, so a failover to a replica that
// missed the last writes loses acknowledged enqueues, claims and
// completions. Every enqueue's acknowledgement (and every pool's claim and
// completion) is compared with what the caller saw before: a ledger that
// went back (a rewind) is logged at error level, counted
// (fencedq_ledger_rewinds_total) and recorded for Inspector.Rewinds and the
// dashboard. The client records its latest acknowledged enqueues
// (Config.RecentEnqueues); Client.Resubmit, or Config.ResubmitOnRewind,
// enqueues those the ledger lost again, each exactly once. ARCHITECTURE.md
// ("Loss you can see") has the mechanism and its limits.
//
// To lose less in the first place, set Config.Durability: each enqueue (and
// each claim, completion and resource-lease acquisition of the pools built
// from the same Config) is acknowledged only once that many replicas hold
// it, one Redis WAIT per pipeline of batched calls. An enqueue too few
// replicas acknowledged in time fails with ErrEnqueueUnknown: enqueue
// again with the same operation id. See Durability for what this
// guarantees and what it does not.
//
// # Types of the engine
//
// Record, Entry, Schedule, PoolInfo and the other values the Inspector
// returns are aliases of the engine's types in internal/ledger, so go doc
// shows them without their fields. Record's comment lists its fields and
// what they mean; each other one's comment gives the go doc command that
// lists them (go doc github.com/fencedq/fencedq/internal/ledger.Entry).
package jobs
