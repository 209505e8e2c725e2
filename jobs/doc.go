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
// error is retried; Permanent(err) goes to dead; Unknown(err) says the
// side effect may or may not have happened and makes the job uncertain, to
// be reconciled rather than guessed. A worker that can find out what
// happened implements Reconcile (the Reconciler interface).
//
// # Enqueueing
//
// Client.Enqueue validates, writes the ledger entry, then the asynq task
// that delivers it. Every job has an operation id (given with OperationID,
// else generated): enqueueing a known operation id returns the existing job
// with Result.Deduplicated set and writes nothing new. Operation ids are
// unique per queue and remembered for the retention period.
//
// # The ledger
//
// Ledger keeps, per job: kind, queue, operation id, state, current token
// and owner, lease deadline, attempt count, redacted args and a history of
// attempts and decisions. Every transition of the state machine (pending,
// running, succeeded, dead, uncertain, review) is one Lua script that checks
// the caller's token, and every script touches one queue's hash slot, so
// the ledger runs on a single Redis, Sentinel and Redis Cluster. Per-state
// sorted sets let the reconciler and the dashboard find jobs without
// scanning keys.
package jobs
