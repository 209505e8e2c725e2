package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/fencedq/fencedq/lease"
)

// JobArgs is implemented by every job's argument type. Kind names the job
// kind; the args are stored as JSON.
type JobArgs interface {
	Kind() string
}

// Validator is implemented by args that can check themselves. Validate runs
// before anything is written; an error rejects the enqueue.
type Validator interface {
	Validate() error
}

// Resourcer is implemented by args that name the resource their attempts
// lease (for example "account:42"), so two jobs touching the same resource
// exclude each other and are fenced against each other. Without it the
// resource is the job itself.
type Resourcer interface {
	Resource() string
}

// Job is one attempt's view of a job, handed to its worker with decoded args.
type Job[T JobArgs] struct {
	// ID is the job's id, an opaque string: a random UUID, or
	// "=<queue>=<operation id>" for a job enqueued on a queue without
	// partitions with an operation id of letters, digits and ._- only
	// (ARCHITECTURE.md, "Redis layout").
	ID string
	// Kind is Args.Kind().
	Kind string
	// Queue is the queue the job was enqueued on.
	Queue string
	// OperationID identifies the job's side effect; storage uses it to apply
	// the effect at most once.
	OperationID string
	// Attempt counts attempts, starting at 1.
	Attempt int
	// MaxRetries is how many retries follow a failed attempt.
	MaxRetries int
	// Resource is the leased resource ("job:<id>" unless the args name one).
	Resource string
	// Token is this attempt's fencing token; pass it with every side effect.
	Token lease.Token
	// Owner identifies this attempt (worker id and job id).
	Owner string
	// Deadline is when the attempt's handler context ends.
	Deadline time.Time
	// Headers are the headers the job was enqueued with (see Header); nil
	// when it has none. They are the handler's own copy: changes are not
	// kept, nor seen by middleware (worker.JobView.Header).
	Headers map[string]string
	// Args are the decoded arguments.
	Args T
}

// Worker handles one job kind. Work's context is cancelled when the
// attempt's lease is lost or its timeout passes; it carries the attempt's
// fence (see package fence).
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc adapts a function to a Worker.
type WorkFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// Verdict is a reconcile answer about an uncertain job's side effect.
type Verdict int

// The reconcile answers are declared one by one, so that go doc lists
// them with the type.

// CannotTell means the outcome is still unknown; ask again later.
const CannotTell Verdict = 0

// Applied means the side effect happened: the job succeeded.
const Applied Verdict = 1

// NotApplied means the side effect did not happen: the attempt failed,
// and the job is retried after the pool's RetryDelay while it has attempts
// left (MaxRetries), else it goes dead.
const NotApplied Verdict = 2

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Applied:
		return "applied"
	case NotApplied:
		return "not_applied"
	}
	return "cannot_tell"
}

// Reconciler is implemented by workers that can tell whether an uncertain
// job's side effect happened (by asking the external service by operation
// id, for example). The reconciler calls it for jobs left uncertain, with
// a context that ends after the pool's HandlerTimeout: a call still running
// then answers CannotTell (its late answer is dropped), like an error.
// The job carries its headers (Job.Headers), as in Work.
type Reconciler[T JobArgs] interface {
	Reconcile(ctx context.Context, job *Job[T]) (Verdict, error)
}

// RetryOnTimeout is implemented by workers whose side effects are safe to
// repeat: a handler timeout, or a shutdown that cancels the handler (which
// then returns), then schedules a plain retry instead of making the job
// uncertain. A handler abandoned at shutdown (still running after its
// context was cancelled) leaves its job uncertain all the same.
type RetryOnTimeout interface {
	RetryOnTimeout() bool
}

// RulesOf returns the rules of args' kind: what its Go type does beyond its
// JSON. Pools publish them for the kinds they run.
func RulesOf(args JobArgs) KindRules {
	_, validates := args.(Validator)
	_, resource := args.(Resourcer)
	_, limit := args.(Limiter)
	_, rate := args.(RateLimiter)
	_, group := args.(Grouper)
	_, part := args.(Partitioner)
	return KindRules{Validate: validates, Resource: resource, Sensitive: !plainType(reflect.TypeOf(args)),
		Limit: limit, Rate: rate, Group: group, Partition: part}
}

// String describes the job without its args (which may hold sensitive
// fields), so a Job formatted with %v or %+v shows no payload.
func (j Job[T]) String() string {
	return fmt.Sprintf("job %s (kind %s, queue %s, attempt %d, token %s)", j.ID, j.Kind, j.Queue, j.Attempt, j.Token)
}

// LogValue logs the job without its args (see String).
func (j Job[T]) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", j.ID), slog.String("kind", j.Kind), slog.String("queue", j.Queue),
		slog.Int("attempt", j.Attempt), slog.String("token", j.Token.String()))
}
