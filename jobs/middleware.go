package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/clientledger"
	"github.com/fencedq/fencedq/internal/ledger"
)

// EnqueueRequest is one job an enqueue is about to write, as enqueue
// middleware sees it: what is enqueued (Kind, Args or Payload, Resource)
// can be read, and the options, the exported fields, can be amended before
// the write. The fields start as the options given resolved over their
// defaults (Queue "default", MaxRetries DefaultMaxRetries); they are
// validated after the last middleware, exactly as options are, so an
// amendment out of bounds rejects the enqueue with ErrInvalid.
type EnqueueRequest struct {
	kind      string
	args      JobArgs // nil for EnqueueRaw
	payload   []byte  // EnqueueRaw's JSON args
	resource  string  // EnqueueRaw's Resource option
	raw       bool    // from EnqueueRaw
	many      bool    // from EnqueueMany: errors name the job's position
	unchecked bool
	opEmpty   bool         // OperationID("") was given: refused unless middleware sets one
	step      string       // the workflow step the job is ("" for a plain job)
	flow      options      // the Limit and Rate options given (only their fields are read)
	call      *enqueueCall // the call it is one of (see Client.write)

	// Queue is the job's queue.
	Queue string
	// OperationID is the job's operation id ("": the job's own id; an
	// OperationID("") option left empty here is refused).
	OperationID string
	// Delay schedules the job that long after the enqueue (zero: due at
	// once). At most one of Delay and RunAt may be set: a middleware that
	// sets one clears the other, or the enqueue is refused with ErrInvalid.
	Delay time.Duration
	// RunAt schedules the job at that time (zero: due at once); see Delay.
	RunAt time.Time
	// MaxRetries is how many retries follow a failed attempt.
	MaxRetries int
	// Timeout bounds each attempt's handler (0: the pool's HandlerTimeout).
	Timeout time.Duration
	// Headers are the job's headers (see Header); nil when none was given.
	// Middleware may set some, with SetHeader or by assigning the map.
	Headers map[string]string
	// Unique makes the job unique (see UniqueOpts); nil when it is not.
	// It is the request's own copy of the option's.
	Unique *UniqueOpts
	// PartitionKey picks the job's partition of a partitioned queue (see
	// PartitionKey); "" when none was given.
	PartitionKey string
	// Group is the job's fair group (see Grouper: the Group option, else the
	// args' Group method); "" for none. Middleware may set it (a tenant
	// taken from the context, say).
	Group string
}

// Kind returns the job's kind.
func (r *EnqueueRequest) Kind() string { return r.kind }

// WorkflowStep returns the name of the workflow step the job is, for the
// steps of a workflow.Enqueue, "" for other jobs. A step cannot be unique
// or grouped (see package workflow): a middleware that sets Unique or
// Group, a tenant's fair group say, leaves steps alone, or the workflow is
// refused with ErrInvalid.
func (r *EnqueueRequest) WorkflowStep() string { return r.step }

// Args returns a typed enqueue's args (nil for EnqueueRaw).
func (r *EnqueueRequest) Args() JobArgs { return r.args }

// Payload returns EnqueueRaw's JSON args (nil for a typed enqueue: see
// Args). It may hold sensitive fields: never log or show it.
func (r *EnqueueRequest) Payload() []byte { return r.payload }

// Resource returns the resource the job's attempts will lease: the one the
// args' Resource method names, EnqueueRaw's Resource option, or "" for the
// job itself. When the args' Resource method panics it returns "" and the
// enqueue fails with ErrInvalid naming the method, nothing written.
func (r *EnqueueRequest) Resource() string {
	if res, ok := r.args.(Resourcer); ok && !r.raw {
		var s string
		if err := guard(r.args, "Resource", func() { s = res.Resource() }); err != nil {
			if r.flow.argsErr == nil {
				r.flow.argsErr = err
			}
			return ""
		}
		return s
	}
	return r.resource
}

// SetHeader sets one of the job's headers (see Header for the limits).
func (r *EnqueueRequest) SetHeader(key, value string) {
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	r.Headers[key] = value
}

// options returns the request's options.
func (r *EnqueueRequest) options() options {
	return options{queue: r.Queue, op: r.OperationID, opSet: r.opEmpty, runAt: r.RunAt, delay: r.Delay, maxRetries: r.MaxRetries,
		timeout: r.Timeout, resource: r.resource, resSet: r.flow.resSet, unchecked: r.unchecked, headers: r.Headers, unique: r.Unique,
		// a typed job's group is the request's (middleware may clear it); a
		// raw job's counts as given only when an option or middleware gave one
		partitionKey: r.PartitionKey, group: r.Group, groupSet: !r.raw || r.flow.groupSet || r.Group != "",
		limitKey: r.flow.limitKey, limitMax: r.flow.limitMax, limitSet: r.flow.limitSet,
		rateKey: r.flow.rateKey, rateMax: r.flow.rateMax, ratePer: r.flow.ratePer, rateSet: r.flow.rateSet,
		nilOption: r.flow.nilOption, argsErr: r.flow.argsErr}
}

// typedRequest is a typed enqueue's request; many marks EnqueueMany's.
func typedRequest(args JobArgs, o options, many bool) *EnqueueRequest {
	r := newRequest("", nil, o)
	r.args, r.many = args, many
	if !argtype.IsNil(args) { // nil args are refused after the middleware
		var err error
		if r.kind, err = kindOf(args); err != nil {
			r.flow.argsErr = err // refused after the middleware, as a panicking Group is
			return r
		}
		r.flow.argsErr = groupArgs(args, &o)
		r.Group = o.group
	}
	return r
}

// rawRequest is EnqueueRaw's request.
func rawRequest(kind string, payload []byte, o options) *EnqueueRequest {
	r := newRequest(kind, payload, o)
	r.raw = true
	return r
}

func newRequest(kind string, payload []byte, o options) *EnqueueRequest {
	return &EnqueueRequest{
		kind: kind, payload: payload, resource: o.resource, unchecked: o.unchecked, opEmpty: o.opSet && o.op == "", flow: o,
		Queue: o.queue, OperationID: o.op, Delay: o.delay, RunAt: o.runAt, MaxRetries: o.maxRetries,
		Timeout: o.timeout, Headers: maps.Clone(o.headers), Unique: cloneUnique(o.unique), PartitionKey: o.partitionKey,
		Group: o.group,
	}
}

// cloneUnique copies u (nil stays nil), so a request amended by middleware
// never changes the Unique option it came from, which callers may reuse.
func cloneUnique(u *UniqueOpts) *UniqueOpts {
	if u == nil {
		return nil
	}
	c := *u
	c.ByFields, c.ByState = slices.Clone(u.ByFields), slices.Clone(u.ByState)
	return &c
}

// EnqueueFunc writes the jobs of one enqueue call: one request for
// Client.Enqueue and EnqueueRaw, every job of Client.EnqueueMany in order.
// results has one entry per request, nil for a job that was not written
// (results is nil when the call wrote nothing, as for an invalid job); the
// error is the call's (ErrInvalid, ErrEnqueueUnknown, ...).
type EnqueueFunc func(ctx context.Context, reqs []*EnqueueRequest) (results []*Result, err error)

// EnqueueMiddleware wraps every enqueue call of a Client (Config.EnqueueMiddleware):
// it sees the requests before the write and may amend their options, and
// sees the results and the error after it. It must call next once (a
// second call, or one after the enqueue returned, writes nothing and
// returns ErrNextCalled), with
// the same requests in the same order, to have them written (other
// requests are refused with ErrInvalid, nothing written; none at all, for
// a call with some, under a context derived from the call's, ends the
// call too, so a later next writes nothing), or return an
// error without calling it, to write nothing; the context it passes on is
// the one the write runs under. A chain that returns no error without a
// result for every request fails the call with ErrEnqueueUnknown. A batch
// (EnqueueMany) passes through once, so it keeps its single round trip.
type EnqueueMiddleware func(next EnqueueFunc) EnqueueFunc

// chain wraps write in mw, mw[0] outermost. A middleware that returns a
// nil EnqueueFunc is refused with ErrInvalid: the chain would be skipped,
// or an enqueue would panic.
func chain(mw []EnqueueMiddleware, write EnqueueFunc) (EnqueueFunc, error) {
	next := write
	for i := len(mw) - 1; i >= 0; i-- {
		if next = mw[i](next); next == nil {
			return nil, invalid("EnqueueMiddleware %d returned a nil EnqueueFunc", i)
		}
	}
	return next, nil
}

// enqueueCall is one enqueue call through the middleware: its requests, in
// their order, and whether its write started (next runs it once).
type enqueueCall struct {
	reqs  []*EnqueueRequest
	ended atomic.Bool // the write started, or the call returned: next refuses
}

// callKey is the context key of the enqueueCall a middleware chain runs
// (see Client.write).
type callKey struct{}

// viaMiddleware runs reqs through the client's enqueue middleware. A chain
// that ends without an error but without a result for every request (a
// middleware that returned nil, nil instead of calling next or returning an
// error) fails with an error matching ErrEnqueueUnknown: the caller cannot
// tell whether its jobs were written, and must not get a nil Result and a
// nil error.
func (c *Client) viaMiddleware(ctx context.Context, reqs []*EnqueueRequest) ([]*Result, error) {
	call := &enqueueCall{reqs: slices.Clone(reqs)}
	for _, r := range reqs {
		r.call = call
	}
	res, err := c.mw(context.WithValue(ctx, callKey{}, call), reqs)
	call.ended.Store(true) // a next called later, from a goroutine, writes nothing
	return settle(reqs, res, err)
}

// settle checks what a middleware chain returned for reqs (see
// viaMiddleware).
func settle(reqs []*EnqueueRequest, res []*Result, err error) ([]*Result, error) {
	if err != nil {
		return res, err
	}
	if len(res) != len(reqs) || slices.Contains(res, nil) {
		return res, fmt.Errorf("%w: the enqueue middleware returned no error and %d results for %d jobs (it must call next, or return an error)",
			ErrEnqueueUnknown, len(res), len(reqs))
	}
	return res, nil
}

// one returns a single enqueue's result.
func one(res []*Result, err error) (*Result, error) {
	if len(res) == 0 {
		return nil, err
	}
	return res[0], err
}

// write is the last link of the middleware chain: it validates the
// requests as they are now (one invalid job rejects the call, nothing
// written) and writes them. They must be one call's own requests, in
// their order: a middleware that passed on others (dropped, added or
// reordered) would have some written under a failed call, or hand the
// caller each job's result under another job's position; it is refused
// with ErrInvalid, nothing written; one that passed on none of them, for
// a call with some, ends the call too (a later next writes nothing).
func (c *Client) write(ctx context.Context, reqs []*EnqueueRequest) ([]*Result, error) {
	if len(reqs) > 0 && (reqs[0].call == nil || !slices.Equal(reqs, reqs[0].call.reqs)) {
		return nil, invalid("the enqueue middleware passed on other requests than its call's, in their order")
	}
	if len(reqs) == 0 {
		// All of a call's requests dropped (an empty EnqueueMany has none):
		// refused, and the call's requests are not written later either.
		if call, _ := ctx.Value(callKey{}).(*enqueueCall); call != nil && len(call.reqs) > 0 {
			call.ended.Store(true)
			return nil, invalid("the enqueue middleware passed on none of its call's %d requests", len(call.reqs))
		}
	}
	js := make([]*ledger.NewJob, len(reqs))
	for i, r := range reqs {
		var (
			j   *ledger.NewJob
			err error
		)
		o := r.options()
		if r.raw {
			j, err = c.prepareRaw(ctx, r.kind, r.payload, o)
		} else {
			j, err = prepareTyped(r.args, o)
		}
		if err != nil {
			c.rejected(o.queue)
			if r.many {
				err = fmt.Errorf("job %d: %w", i, err)
			}
			return nil, err
		}
		js[i] = j
	}
	if len(reqs) > 0 && !reqs[0].call.ended.CompareAndSwap(false, true) {
		return nil, ErrNextCalled // written once already, or the call returned
	}
	return c.insert(ctx, js)
}

// through runs the steps of a workflow (see clientledger.Through) through
// the client's enqueue middleware as one batch: the middleware sees (and
// may amend) each step's request, write gets each step's options as the
// middleware left them, and the middleware sees what write wrote.
func (c *Client) through(ctx context.Context, steps []string, args, opts []any, write func(context.Context, []any) ([]clientledger.Written, error)) error {
	reqs := make([]*EnqueueRequest, len(args))
	for i := range args {
		a, _ := args[i].(JobArgs)
		o, _ := opts[i].([]Option)
		reqs[i] = typedRequest(a, optionsOf(o), true)
		reqs[i].step = steps[i]
	}
	given := slices.Clone(reqs)
	var ended atomic.Bool // next writes the workflow once, and not once the call returned
	last := func(ctx context.Context, reqs []*EnqueueRequest) ([]*Result, error) {
		if !slices.Equal(reqs, given) {
			return nil, invalid("the enqueue middleware passed on other requests than the workflow's %d steps, in their order", len(given))
		}
		if !ended.CompareAndSwap(false, true) {
			return nil, ErrNextCalled
		}
		amended := make([]any, len(reqs))
		for i, r := range reqs {
			o := r.options()
			amended[i] = []Option{func(x *options) { *x = o }}
		}
		ws, err := write(ctx, amended)
		if ws == nil {
			return nil, err
		}
		res := make([]*Result, len(ws))
		for i, w := range ws {
			res[i] = &Result{JobID: w.JobID, Queue: ledger.Logical(w.Queue), OperationID: w.OperationID,
				Deduplicated: w.Deduplicated, Partition: w.Queue}
		}
		return res, err
	}
	mw, err := chain(c.mws, last)
	if err != nil {
		return err
	}
	res, err := mw(ctx, reqs)
	ended.Store(true)
	_, err = settle(reqs, res, err)
	return err
}

// String describes the request without its args (which may hold sensitive
// fields), so a request formatted with %v or %+v shows no payload.
func (r EnqueueRequest) String() string {
	return fmt.Sprintf("enqueue of kind %s (queue %s, operation id %q)", r.kind, r.Queue, r.OperationID)
}

// LogValue logs the request without its args (see String).
func (r EnqueueRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", r.kind), slog.String("queue", r.Queue), slog.String("operation_id", r.OperationID))
}
