package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

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
// the existing job instead of creating one. Default: a new UUID.
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

// Client enqueues jobs: it writes the ledger entry, then the asynq task
// that delivers it. It is safe for concurrent use.
type Client struct {
	ledger *Ledger
	aq     *asynq.Client
	known  sync.Map // queues already registered in the queue set
	m      *metrics.Set
}

// NewClient returns a Client over rdb. Close it when done (rdb stays open).
func NewClient(rdb redis.UniversalClient, cfg Config) *Client {
	return &Client{ledger: NewLedger(rdb, cfg), aq: asynq.NewClientFromRedisClient(rdb), m: metrics.New(cfg.Registerer)}
}

// Ledger returns the client's ledger (for reads and operator actions).
func (c *Client) Ledger() *Ledger { return c.ledger }

// Close releases the asynq client; the Redis client stays open.
func (c *Client) Close() error { return c.aq.Close() }

// Enqueue validates args and creates a pending job. Invalid args return an
// error matching ErrInvalid and write nothing. If the operation id is
// already known, the existing job's id is returned with Deduplicated set.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts ...Option) (*Result, error) {
	res, err := c.enqueueTyped(ctx, args, opts)
	return res, c.count(res, err, opts)
}

// count records an enqueue's outcome in the metrics.
func (c *Client) count(res *Result, err error, opts []Option) error {
	switch {
	case res != nil && res.Deduplicated:
		c.m.Deduplicated.WithLabelValues(res.Queue, metrics.StageEnqueue).Inc()
	case res != nil:
		c.m.Enqueued.WithLabelValues(res.Queue).Inc()
	case errors.Is(err, ErrInvalid):
		o := options{queue: DefaultQueue}
		for _, f := range opts {
			f(&o)
		}
		if ValidateQueue(o.queue) != nil {
			o.queue = "invalid" // never a user-given value as a label
		}
		c.m.Rejected.WithLabelValues(o.queue, metrics.ReasonInvalid).Inc()
	}
	return err
}

func (c *Client) enqueueTyped(ctx context.Context, args JobArgs, opts []Option) (*Result, error) {
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
	display, err := RedactJSON(args)
	if err != nil {
		return nil, invalid("%s args: %v", args.Kind(), err)
	}
	if r, ok := args.(Resourcer); ok {
		res := r.Resource()
		if res == "" {
			return nil, invalid("%s: Resource() returned an empty resource", args.Kind())
		}
		opts = append(opts, Resource(res))
	}
	return c.enqueue(ctx, args.Kind(), payload, display, opts)
}

// EnqueueRaw enqueues a job from its kind and JSON args, for callers without
// the Go type (the CLI, other languages' bridges). The payload must be a JSON
// object; it is shown as is, so it must not hold secrets.
func (c *Client) EnqueueRaw(ctx context.Context, kind string, payload []byte, opts ...Option) (*Result, error) {
	var obj map[string]any
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, c.count(nil, invalid("payload is not a JSON object: %v", err), opts)
	}
	res, err := c.enqueue(ctx, kind, payload, payload, opts)
	return res, c.count(res, err, opts)
}

func (c *Client) enqueue(ctx context.Context, kind string, payload, display []byte, opts []Option) (*Result, error) {
	o := options{queue: DefaultQueue, maxRetries: DefaultMaxRetries}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case kind == "" || len(kind) > 100 || strings.ContainsAny(kind, " \t\r\n{}"):
		return nil, invalid("kind %q must be 1-100 characters without spaces or braces", kind)
	case len(payload) > MaxPayloadBytes:
		return nil, invalid("payload of %d bytes exceeds %d", len(payload), MaxPayloadBytes)
	case o.maxRetries < 0:
		return nil, invalid("max retries %d is negative", o.maxRetries)
	case o.timeout < 0 || o.delay < 0:
		return nil, invalid("negative timeout or delay")
	case len(o.op) > 200:
		return nil, invalid("operation id longer than 200 bytes")
	case len(o.resource) > 512:
		return nil, invalid("resource longer than 512 bytes")
	}
	if err := ValidateQueue(o.queue); err != nil {
		return nil, err
	}
	if o.op == "" {
		o.op = uuid.NewString()
	}
	runAt := o.runAt
	if o.delay > 0 {
		runAt = time.Now().Add(o.delay)
	}
	id := uuid.NewString()
	if _, seen := c.known.Load(o.queue); !seen {
		if err := c.ledger.rdb.SAdd(ctx, c.ledger.QueuesKey(), o.queue).Err(); err != nil {
			return nil, fmt.Errorf("jobs: register queue: %w", err)
		}
		c.known.Store(o.queue, true)
	}
	gotID, dup, err := c.ledger.insert(ctx, newJob{
		id: id, kind: kind, queue: o.queue, op: o.op, resource: o.resource,
		payload: payload, display: display, maxRetries: o.maxRetries, timeout: o.timeout,
		runAt: runAt, task: id,
	})
	if err != nil {
		return nil, err
	}
	res := &Result{JobID: gotID, Queue: o.queue, OperationID: o.op, Deduplicated: dup}
	if dup {
		// The first enqueue may have failed between the ledger and asynq:
		// make sure a pending job has its delivery (same task id: no duplicate).
		rec, err := c.ledger.Get(ctx, o.queue, gotID)
		if err == nil && rec.State == Pending {
			if err := c.Dispatch(ctx, rec); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	rec := &Record{ID: id, Kind: kind, Queue: o.queue, Resource: o.resource, Task: id, RunAt: runAt, MaxRetries: o.maxRetries}
	if err := c.Dispatch(ctx, rec); err != nil {
		return res, err
	}
	return res, nil
}

// Envelope is the asynq task payload: which job a delivery is for.
type Envelope struct {
	JobID    string `json:"id"`
	Resource string `json:"res,omitempty"`
}

// Dispatch enqueues the asynq task that delivers rec's current run (task id
// rec.Task). It is idempotent: an existing task with that id is success.
// asynq keeps its own retry count; the ledger's attempt count is the one
// that decides (see package worker).
func (c *Client) Dispatch(ctx context.Context, rec *Record) error {
	env, _ := json.Marshal(Envelope{JobID: rec.ID, Resource: rec.Resource})
	opts := []asynq.Option{
		asynq.TaskID(rec.Task),
		asynq.Queue(c.ledger.AsynqQueue(rec.Queue)),
		asynq.MaxRetry(rec.MaxRetries),
		// The pool enforces the job's own timeout; asynq's only bounds a
		// handler that ignores every context.
		asynq.Timeout(24 * time.Hour),
	}
	if !rec.RunAt.IsZero() && rec.RunAt.After(time.Now()) {
		opts = append(opts, asynq.ProcessAt(rec.RunAt))
	}
	_, err := c.aq.EnqueueContext(ctx, asynq.NewTask(rec.Kind, env), opts...)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("jobs: dispatch %s (the job is recorded as pending; enqueueing the same operation id again retries the dispatch): %w", rec.ID, err)
	}
	return nil
}
