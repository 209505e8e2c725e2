package jobs

import "time"

// Prepared is a job validated exactly as Enqueue validates it, not yet
// written: what a caller that keeps jobs to enqueue later (a transactional
// outbox, a periodic schedule) needs to know about them.
type Prepared struct {
	Kind        string
	Queue       string
	OperationID string // "" when none was given
	Resource    string // "" when the args name none
	MaxRetries  int
	Timeout     time.Duration // 0: the pool's HandlerTimeout
	RunAt       time.Time     // zero: due at enqueue; a Delay counts from Prepare (by the caller's clock)
	// Payload is the raw JSON args, sensitive fields included.
	Payload []byte
	// Display is the args with sensitive fields redacted (see RedactJSON).
	Display []byte
	// PartitionKey routes the job on a partitioned queue ("" none: see
	// PartitionKey).
	PartitionKey string
}

// Prepare validates args and opts as Enqueue does (an error matches
// ErrInvalid) and returns the job they describe, without writing anything.
func Prepare(args JobArgs, opts ...Option) (*Prepared, error) {
	j, err := prepareTyped(args, optionsOf(opts))
	if err != nil {
		return nil, err
	}
	return &Prepared{
		Kind: j.Kind, Queue: j.Queue, OperationID: j.OperationID, Resource: j.Resource, MaxRetries: j.MaxRetries,
		Timeout: j.Timeout, RunAt: runAt(j.Delay), Payload: j.Payload, Display: j.Display, PartitionKey: j.PartitionKey,
	}, nil
}

// runAt is the wall-clock time a job prepared now with delay d is due.
func runAt(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}
