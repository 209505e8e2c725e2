package asynqfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/internal/argtype"
	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// NewTask returns an asynq task of type args.Kind() with args as its JSON
// payload, for a worker registered with Handle. A non-empty operationID
// travels in the OperationHeader header and names the job in the ledger
// (one effect per operation id, whatever the asynq task ids). Nil args,
// or args whose Kind method panics, fail with an error matching
// jobs.ErrInvalid.
func NewTask[T jobs.JobArgs](args T, operationID string, opts ...asynq.Option) (*asynq.Task, error) {
	if argtype.IsNil(args) {
		return nil, fmt.Errorf("%w: asynqfence: nil args", jobs.ErrInvalid)
	}
	kind, err := kindOf(args)
	if err != nil {
		return nil, err
	}
	if err := jobs.ValidateKind(kind); err != nil {
		return nil, err
	}
	if operationID != "" {
		if err := jobs.ValidateOperationID(operationID); err != nil {
			return nil, err
		}
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("asynqfence: encode %s args: %w", kind, err)
	}
	var headers map[string]string
	if operationID != "" {
		headers = map[string]string{OperationHeader: operationID}
	}
	return asynq.NewTaskWithHeaders(kind, payload, headers, opts...), nil
}

// kindOf returns args' kind, or an error matching jobs.ErrInvalid when its
// Kind method panics (as jobs.Client.Enqueue refuses such args).
func kindOf(args jobs.JobArgs) (kind string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: asynqfence: %T's Kind method panicked: %s", jobs.ErrInvalid, args, ledger.Clip(jobs.RedactText(args, fmt.Sprint(r))))
		}
	}()
	return args.Kind(), nil
}

// Handler returns a fencedq worker as an asynq handler: it decodes the task's
// JSON payload into T and calls w.Work with a jobs.Job carrying the
// attempt's token, and the task's headers as Job.Headers (a copy). It must run under the bridge's middleware (else it fails
// with ErrNoAttempt). A payload that does not decode into T, or whose args'
// Validate fails, makes the job dead at once (reason "malformed payload",
// counted in fencedq_jobs_rejected_total), as native pools make it. When w has a Reconcile method the handler implements
// TaskReconciler, so the bridge asks it about uncertain tasks (the job
// carrying the delivering task's headers too); a
// RetryOnTimeout method is honoured too. A nil w (or a nil function or
// pointer in it), or a T whose Kind method panics on T's zero value (a
// kind read through a nil pointer), panics here, as asynq's
// ServeMux.Handle panics on a nil handler, instead of failing every
// delivery.
func Handler[T jobs.JobArgs](w jobs.Worker[T]) asynq.Handler {
	if argtype.IsNil(w) {
		panic("asynqfence: Handler of a nil worker")
	}
	kind, err := argtype.ZeroKind[T]()
	if err != nil {
		panic("asynqfence: Handler: " + err.Error())
	}
	h := &typed[T]{w: w, kind: kind, sensitive: jobs.RulesOf(argtype.Zero[T]()).Sensitive}
	if r, ok := w.(jobs.Reconciler[T]); ok {
		return &reconciling[T]{typed: h, r: r}
	}
	return h
}

// Handle registers w on mux under its kind (T's Kind()); it panics as
// Handler does.
func Handle[T jobs.JobArgs](mux *asynq.ServeMux, w jobs.Worker[T]) {
	h := Handler(w)
	mux.Handle(h.(kindLabeler).kindLabel(), h)
}

// errMalformed marks a payload that does not decode into a typed worker's
// args: the job is dead at once, as native pools make it.
var errMalformed = errors.New("asynqfence: malformed payload")

// typed runs a typed worker. When its kind has sensitive fields, the
// texts user code builds (errors, panic values) have their values replaced
// (jobs.RedactText) before the bridge stores, logs or returns them.
type typed[T jobs.JobArgs] struct {
	w         jobs.Worker[T]
	kind      string // T's Kind()
	sensitive bool
}

func (h *typed[T]) ProcessTask(ctx context.Context, t *asynq.Task) (err error) {
	a, ok := AttemptFromContext(ctx)
	if !ok {
		return ErrNoAttempt
	}
	job, err := decode[T](t.Type(), t.Payload(), h.sensitive)
	if err != nil {
		return jobs.Permanent(err)
	}
	if h.sensitive {
		defer rules.Redact(job.Args, &err)
	}
	job.ID, job.Queue, job.OperationID, job.Attempt, job.MaxRetries = a.ID, a.Queue, a.OperationID, a.Attempt, a.MaxRetries
	job.Resource, job.Token, job.Owner = a.Resource, a.Token, a.Owner
	if h := t.Headers(); len(h) > 0 {
		job.Headers = maps.Clone(h) // the handler's own copy, as a native pool's
	}
	if dl, ok := ctx.Deadline(); ok {
		job.Deadline = dl
	}
	return h.w.Work(ctx, job)
}

// kindLabel is the worker's kind, the handler's metric label.
func (h *typed[T]) kindLabel() string { return h.kind }

// RetryOnTimeout passes the worker's own answer on (false without one).
func (h *typed[T]) RetryOnTimeout() bool {
	r, ok := h.w.(jobs.RetryOnTimeout)
	return ok && r.RetryOnTimeout()
}

type reconciling[T jobs.JobArgs] struct {
	*typed[T]
	r jobs.Reconciler[T]
}

// ReconcileTask asks the worker's Reconcile about an uncertain job.
func (h *reconciling[T]) ReconcileTask(ctx context.Context, rec *jobs.Record) (_ jobs.Verdict, err error) {
	job, err := decode[T](rec.Kind, rec.Payload, h.sensitive)
	if err != nil {
		return jobs.CannotTell, err
	}
	if h.sensitive {
		defer rules.Redact(job.Args, &err)
	}
	job.ID, job.Queue, job.OperationID, job.Attempt, job.MaxRetries = rec.ID, rec.Queue, rec.OperationID, rec.Attempts, rec.MaxRetries
	job.Resource, job.Token, job.Owner = rec.LeaseResource(), rec.Token, rec.Owner
	job.Headers = maps.Clone(rec.Headers) // the delivering task's (see Bridge.reconcile), its own copy
	return h.r.Reconcile(ctx, job)
}

// decode decodes payload into T and validates it; a Validate error's text,
// and a panic's value, have the args' sensitive values replaced when
// sensitive.
func decode[T jobs.JobArgs](kind string, payload []byte, sensitive bool) (*jobs.Job[T], error) {
	var args T
	if !argtype.IsJSONObject(payload) {
		return nil, fmt.Errorf("%w: %s: args are not a JSON object", errMalformed, kind)
	}
	if err := jobs.DecodeArgs(payload, &args); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errMalformed, kind, err)
	}
	if err := rules.Validate(args, sensitive); err != nil {
		return nil, fmt.Errorf("%w: %s: invalid args: %w", errMalformed, kind, err)
	}
	return &jobs.Job[T]{Kind: kind, Args: args}, nil
}
