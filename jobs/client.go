package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
)

// DefaultQueue is the queue used when none is given.
const DefaultQueue = "default"

// DefaultMaxRetries is the number of retries when none is given.
const DefaultMaxRetries = 5

// MaxPayloadBytes bounds a job's JSON args.
const MaxPayloadBytes = 1 << 20

// Option changes how a job is enqueued.
type Option func(*options)

type options struct {
	queue      string
	op         string
	runAt      time.Time
	delay      time.Duration
	maxRetries int
	timeout    time.Duration
	resource   string
}

// Queue puts the job on queue q (default "default").
func Queue(q string) Option { return func(o *options) { o.queue = q } }

// OperationID names the job's side effect. Enqueueing an operation id that
// is already known (in the same queue, within the retention period) returns
// the existing job instead of creating one. Default: the job's own id.
func OperationID(id string) Option { return func(o *options) { o.op = id } }

// Delay makes the job due after d.
func Delay(d time.Duration) Option { return func(o *options) { o.delay = d } }

// RunAt makes the job due at t.
func RunAt(t time.Time) Option { return func(o *options) { o.runAt = t } }

// MaxRetries sets how many retries follow a failed attempt (default 5).
func MaxRetries(n int) Option { return func(o *options) { o.maxRetries = n } }

// Timeout bounds each attempt's handler (default: the pool's HandlerTimeout).
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Resource sets the leased resource for EnqueueRaw (typed args declare it
// with a Resource method instead).
func Resource(r string) Option { return func(o *options) { o.resource = r } }

// Result reports what Enqueue did.
type Result struct {
	// JobID is the new job's id, or the existing one's when deduplicated.
	JobID string
	// Queue is the job's queue.
	Queue string
	// OperationID is the job's operation id.
	OperationID string
	// Deduplicated is true when the operation id was already known and
	// nothing was written.
	Deduplicated bool
}

// Client enqueues jobs: one script call writes the job, its operation id
// and its place in the queue's due index, and wakes idle pools. It is safe
// for concurrent use; enqueues from many goroutines share pipelines.
//
// Each acknowledgement is checked against what the client saw before, so a
// Redis that came back with older data (a failover to a lagging replica) is
// detected: logged at error level, counted (fencedq_ledger_rewinds_total),
// recorded for the dashboard, and the client's record of its recent
// enqueues can be re-submitted (Resubmit).
type Client struct {
	ledger       *ledger.Ledger
	m            *metrics.Set
	nsErr        error // an invalid namespace: every call fails with it
	log          *slog.Logger
	resubmitting atomic.Bool // a background Resubmit runs (Config.ResubmitOnRewind)
}

// NewClient returns a Client over rdb. An invalid Config.Namespace makes
// every call fail with an error matching ErrInvalid.
func NewClient(rdb redis.UniversalClient, cfg Config) *Client {
	c := &Client{m: metrics.New(cfg.Registerer), nsErr: cfg.Validate()}
	lc := cfg.ledger()
	c.log = lc.Logger
	lc.Recent = cfg.recent()
	lc.OnRewind = func(r Rewind) {
		c.m.Rewinds.WithLabelValues(r.Queue).Inc()
		if cfg.ResubmitOnRewind {
			c.resubmitInBackground()
		}
	}
	c.ledger = ledger.New(rdb, lc)
	return c
}

// Rewind is a detected loss of acknowledged ledger writes on one queue
// (Inspector.Rewinds): Redis came back with older data.
type Rewind = ledger.Rewind

// Resubmitted is what Client.Resubmit did for one queue.
type Resubmitted = ledger.Resubmitted

// Resubmit looks for ledger rewinds on every queue the client enqueued to
// (a call's acknowledgement finds them too) and, for each queue found
// rewound since the last call, enqueues again every recorded enqueue (see
// Config.RecentEnqueues) acknowledged before the rewind was detected and
// less than half the retention period ago. A job is created again only when
// the ledger has neither its record nor its operation id, so a job Redis
// kept (whatever became of it), or whose operation was enqueued again
// meanwhile, is left alone: each lost job comes back exactly once, pending,
// due when it was due, its attempts starting over. Whether its effect then
// applies twice is for its fence: a store with an effect log (pgfence,
// redisfence) finds an effect the lost job already applied. The restored
// jobs are counted (fencedq_jobs_resubmitted_total) and added to the
// rewind's record. Enqueues the client never saw acknowledged, and those of
// other clients, are not in its record.
func (c *Client) Resubmit(ctx context.Context) ([]Resubmitted, error) {
	if c.nsErr != nil {
		return nil, c.nsErr
	}
	out, err := c.ledger.Resubmit(ctx)
	for _, r := range out {
		c.m.Resubmitted.WithLabelValues(r.Queue).Add(float64(r.Restored))
	}
	return out, err
}

// resubmitInBackground runs Resubmit once in its own goroutine unless one
// runs already.
func (c *Client) resubmitInBackground() {
	if !c.resubmitting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.resubmitting.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.Resubmit(ctx); err != nil {
			c.log.Error("re-submitting recorded enqueues after a ledger rewind failed; call Client.Resubmit again", "error", err)
		}
	}()
}

// Inspector returns the read API over the client's namespace.
func (c *Client) Inspector() *Inspector { return &Inspector{l: c.ledger, nsErr: c.nsErr} }

// Close releases nothing today (the Redis client stays open); it is kept so
// callers can treat the client as a resource.
func (c *Client) Close() error { return nil }

// Enqueue validates args and creates a pending job. Invalid args return an
// error matching ErrInvalid and write nothing. If the operation id is
// already known, the existing job's id is returned with Deduplicated set.
// An enqueue is atomic: a Redis error (matching ErrEnqueueUnknown) means
// the job was written whole or not at all; enqueue again with the same
// OperationID to find out safely.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts ...Option) (*Result, error) {
	if c.nsErr != nil {
		return nil, c.nsErr
	}
	j, err := prepareTyped(args, opts)
	if err != nil {
		c.rejected(opts)
		return nil, err
	}
	return c.insertOne(ctx, j)
}

// EnqueueRaw enqueues a job from its kind and JSON args, for callers without
// the Go type (the CLI, other languages' bridges). The payload must be a JSON
// object; it is shown as is, so it must not hold secrets.
func (c *Client) EnqueueRaw(ctx context.Context, kind string, payload []byte, opts ...Option) (*Result, error) {
	if c.nsErr != nil {
		return nil, c.nsErr
	}
	if !json.Valid(payload) {
		c.rejected(opts)
		return nil, invalid("%s args are not valid JSON", kind)
	}
	j, err := prepare(kind, payload, nil, opts)
	if err != nil {
		c.rejected(opts)
		return nil, err
	}
	return c.insertOne(ctx, j)
}

// Params is one job of an EnqueueMany call.
type Params struct {
	Args    JobArgs
	Options []Option
}

// EnqueueMany validates every job first (one invalid job rejects the whole
// call, nothing written) and then enqueues them all in one round trip per
// pipeline (per queue slot on Redis Cluster), each deduplicated by its
// operation id. Results come in the order of ps. On a Redis error some jobs
// may have been written and others not; each job's write is whole, and
// enqueueing the same operation ids again is safe.
func (c *Client) EnqueueMany(ctx context.Context, ps []Params) ([]*Result, error) {
	if c.nsErr != nil {
		return nil, c.nsErr
	}
	js := make([]*ledger.NewJob, len(ps))
	for i, p := range ps {
		j, err := prepareTyped(p.Args, p.Options)
		if err != nil {
			c.rejected(p.Options)
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		js[i] = j
	}
	return c.insert(ctx, js)
}

func (c *Client) insert(ctx context.Context, js []*ledger.NewJob) ([]*Result, error) {
	ins, err := c.ledger.Insert(ctx, js)
	out := make([]*Result, len(js))
	for i, r := range ins {
		if r == nil {
			continue
		}
		out[i] = &Result{JobID: r.JobID, Queue: r.Queue, OperationID: r.OperationID, Deduplicated: r.Deduplicated}
		if r.Deduplicated {
			c.m.Deduplicated.WithLabelValues(r.Queue, metrics.StageEnqueue).Inc()
		} else {
			c.m.Enqueued.WithLabelValues(r.Queue).Inc()
		}
	}
	return out, err
}

func (c *Client) insertOne(ctx context.Context, j *ledger.NewJob) (*Result, error) {
	out, err := c.insert(ctx, []*ledger.NewJob{j})
	return out[0], err
}

// rejected counts an invalid enqueue.
func (c *Client) rejected(opts []Option) {
	o := options{queue: DefaultQueue}
	for _, f := range opts {
		f(&o)
	}
	if ValidateQueue(o.queue) != nil {
		o.queue = "invalid" // never a user-given value as a label
	}
	c.m.Rejected.WithLabelValues(o.queue, metrics.ReasonInvalid).Inc()
}

func prepareTyped(args JobArgs, opts []Option) (*ledger.NewJob, error) {
	if args == nil {
		return nil, invalid("nil args")
	}
	if v, ok := args.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, args.Kind(), err)
		}
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, invalid("%s args do not encode as JSON: %v", args.Kind(), err)
	}
	display := payload // args that can hold no sensitive field are shown as encoded
	if !plainType(reflect.TypeOf(args)) {
		if display, err = RedactJSON(args); err != nil {
			return nil, invalid("%s args: %v", args.Kind(), err)
		}
	}
	if r, ok := args.(Resourcer); ok {
		res := r.Resource()
		if res == "" {
			return nil, invalid("%s: Resource() returned an empty resource", args.Kind())
		}
		opts = append(opts, Resource(res))
	}
	return prepare(args.Kind(), payload, display, opts)
}

// IsJSONObject reports whether payload is one JSON object ("null", arrays
// and scalars are not).
func IsJSONObject(payload []byte) bool { return StartsObject(payload) && json.Valid(payload) }

// StartsObject reports whether valid JSON is an object: its first
// non-space byte is '{'. Cheap; use it on JSON already validated.
func StartsObject(valid []byte) bool {
	for _, c := range valid {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// prepare validates everything before anything is written. payload is
// valid JSON.
func prepare(kind string, payload, display []byte, opts []Option) (*ledger.NewJob, error) {
	o := options{queue: DefaultQueue, maxRetries: DefaultMaxRetries}
	for _, f := range opts {
		f(&o)
	}
	if err := ValidateKind(kind); err != nil {
		return nil, err
	}
	switch {
	case len(payload) > MaxPayloadBytes:
		return nil, invalid("payload of %d bytes exceeds %d", len(payload), MaxPayloadBytes)
	case !StartsObject(payload): // valid JSON: checked by EnqueueRaw, produced by Marshal
		return nil, invalid("%s args must be a JSON object", kind)
	case o.maxRetries < 0:
		return nil, invalid("max retries %d is negative", o.maxRetries)
	case o.timeout < 0 || o.delay < 0:
		return nil, invalid("negative timeout or delay")
	}
	if o.op != "" {
		if err := ValidateOperationID(o.op); err != nil {
			return nil, err
		}
	}
	if o.resource != "" {
		if err := ValidateResource(o.resource); err != nil {
			return nil, err
		}
	}
	if err := ValidateQueue(o.queue); err != nil {
		return nil, err
	}
	if display == nil {
		display = payload
	}
	delay := o.delay
	if !o.runAt.IsZero() {
		delay = time.Until(o.runAt) // a wall-clock time: the caller's clock says how far off it is
	}
	return &ledger.NewJob{
		ID: uuid.NewString(), Kind: kind, Queue: o.queue, OperationID: o.op, Resource: o.resource,
		Payload: payload, Display: display, MaxRetries: o.maxRetries, Timeout: o.timeout, Delay: delay,
	}, nil
}
