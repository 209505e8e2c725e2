package jobs

import (
	"fmt"
	"log/slog"
	"maps"
	"time"
)

// Prepared is a job validated exactly as Enqueue validates it, not yet
// written: what a caller that keeps jobs to enqueue later (a transactional
// outbox, a periodic schedule, a workflow) needs to know about them. Every
// option Enqueue honours is here, so a caller that cannot carry one can
// refuse it instead of dropping it.
type Prepared struct {
	// Kind is the job's kind.
	Kind string
	// Queue is the job's queue (DefaultQueue when none was given).
	Queue       string
	OperationID string // "" when none was given
	Resource    string // "" when the args name none
	// MaxRetries is how many retries follow a failed attempt.
	MaxRetries int
	Timeout    time.Duration // 0: the pool's HandlerTimeout
	RunAt      time.Time     // zero: due at enqueue; a Delay counts from Prepare (by the caller's clock)
	// Payload is the raw JSON args, sensitive fields included.
	Payload []byte
	// Display is the args with sensitive fields redacted (see RedactJSON).
	Display []byte
	// PartitionKey routes the job on a partitioned queue ("" none: see
	// PartitionKey).
	PartitionKey string
	// Headers are the job's headers (Header; nil none).
	Headers map[string]string
	// LimitKey is the key of the job's concurrency limit (Limit, Limiter;
	// "" none).
	LimitKey string
	// LimitMax is how many jobs naming LimitKey may run at once.
	LimitMax int
	// RateKey is the key of the job's rate limit (Rate, RateLimiter; ""
	// none).
	RateKey string
	// RateMax is how many attempts of jobs naming RateKey may start in
	// any window of RatePer.
	RateMax int
	// RatePer is the length of the rate limit's window.
	RatePer time.Duration
	// Group is the job's fair group (Group, Grouper; "" none).
	Group string
	// Unique is the job's uniqueness (Unique; nil when not unique), its
	// ByPeriod rounded up to whole milliseconds as Enqueue keeps it.
	Unique *UniqueOpts
}

// Prepare validates args and opts as Enqueue does (an error matches
// ErrInvalid) and returns the job they describe, without writing anything.
func Prepare(args JobArgs, opts ...Option) (*Prepared, error) {
	o := optionsOf(opts)
	j, err := prepareTyped(args, o)
	if err != nil {
		return nil, err
	}
	p := &Prepared{
		Kind: j.Kind, Queue: j.Queue, OperationID: j.OperationID, Resource: j.Resource, MaxRetries: j.MaxRetries,
		Timeout: j.Timeout, RunAt: runAt(j.Delay), Payload: j.Payload, Display: j.Display, PartitionKey: j.PartitionKey,
		Headers: maps.Clone(j.Headers), Group: j.Group,
	}
	if f := j.Flow; f != nil {
		p.LimitKey, p.LimitMax, p.RateKey, p.RateMax, p.RatePer = f.LimitKey, f.LimitMax, f.RateKey, f.RateMax, f.RatePer
	}
	if o.unique != nil {
		u := *o.unique
		u.ByFields, u.ByState = append([]string(nil), u.ByFields...), append([]State(nil), u.ByState...)
		u.ByPeriod = roundUpMS(u.ByPeriod) // the period Enqueue keys it by, as Timeout
		p.Unique = &u
	}
	return p, nil
}

// runAt is the wall-clock time a job prepared now with delay d is due.
func runAt(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// String describes the prepared job with its redacted args (Display), so a
// Prepared formatted with %v or %+v shows no sensitive field.
func (p Prepared) String() string {
	return fmt.Sprintf("%s job (queue %s, operation id %q, args %s)", p.Kind, p.Queue, p.OperationID, p.Display)
}

// LogValue logs the prepared job with its redacted args (see String).
func (p Prepared) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", p.Kind), slog.String("queue", p.Queue),
		slog.String("operation_id", p.OperationID), slog.String("args", string(p.Display)))
}
