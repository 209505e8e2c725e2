package ledger

// State is a job's state in the ledger (ARCHITECTURE.md has the state table).
type State string

// The job states.
const (
	// Pending jobs wait in the queue until due (new, scheduled, retry
	// scheduled, deferred, or re-run).
	Pending State = "pending"
	// Running jobs have a live attempt holding a token.
	Running State = "running"
	// Succeeded jobs are done; a redelivery is deduplicated.
	Succeeded State = "succeeded"
	// Dead jobs failed permanently or exhausted their retries.
	Dead State = "dead"
	// Cancelled jobs were cancelled by an operator before they could finish.
	Cancelled State = "cancelled"
	// Uncertain jobs may or may not have applied their side effect; the
	// reconciler resolves them.
	Uncertain State = "uncertain"
	// Review jobs wait for an operator's decision.
	Review State = "review"
	// Waiting is the state of a workflow step whose dependencies have not
	// all succeeded: never claimed; it becomes pending when the last one
	// succeeds (see lua/workflow.lua).
	Waiting State = "waiting"
)

// States lists every state in display order.
var States = []State{Waiting, Pending, Running, Uncertain, Review, Succeeded, Dead, Cancelled}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// Final reports whether no more attempts follow (unless an operator re-runs
// the job).
func (s State) Final() bool { return s == Succeeded || s == Dead || s == Cancelled }
