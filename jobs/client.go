package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/clientledger"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/lease"
)

// DefaultQueue is the queue used when none is given.
const DefaultQueue = "default"

// DefaultMaxRetries is the number of retries when none is given.
const DefaultMaxRetries = 5

// MaxPayloadBytes bounds a job's JSON args.
const MaxPayloadBytes = 1 << 20

// Bounds on an enqueue's numbers. A value outside them is refused with an
// error matching ErrInvalid, never wrapped or truncated; durations are kept
// in whole milliseconds, a fraction rounded up (a Timeout of 500µs runs
// under a 1ms timeout, not under the pool's default).
const (
	// MaxMaxRetries bounds MaxRetries (it fits the 32-bit integer columns of
	// the PostgreSQL outbox).
	MaxMaxRetries = math.MaxInt32
	// MaxDelay bounds how far ahead Delay and RunAt may schedule a job.
	MaxDelay = 100 * 365 * 24 * time.Hour
	// MaxTimeout bounds Timeout.
	MaxTimeout = 365 * 24 * time.Hour
)

// Option changes how a job is enqueued. A nil Option is refused with
// ErrInvalid.
type Option func(*options)

type options struct {
	queue      string
	op         string
	opSet      bool // an OperationID option was given ("" then is refused)
	runAt      time.Time
	delay      time.Duration
	maxRetries int
	timeout    time.Duration
	resource   string
	resSet     bool // a Resource option was given ("" then is refused)
	unchecked  bool
	headers    map[string]string
	unique     *UniqueOpts // nil: not unique
	// flow control (limits.go): a concurrency limit and a rate limit
	limitKey, rateKey string
	limitMax, rateMax int
	ratePer           time.Duration
	limitSet, rateSet bool
	// partitionKey picks the partition of a partitioned queue.
	partitionKey string
	// group is the job's fair group (groups.go); groupSet: by an option
	group    string
	groupSet bool
	// nilOption is 1 + the index of the first nil option (0: none); the
	// enqueue is refused.
	nilOption int
	// argsErr is a panic of the args' Group method, met before the
	// enqueue middleware ran: the enqueue fails with it
	argsErr error
}

// optionsOf applies opts over the defaults.
func optionsOf(opts []Option) options {
	o := options{queue: DefaultQueue, maxRetries: DefaultMaxRetries}
	for i, f := range opts {
		if f == nil {
			if o.nilOption == 0 {
				o.nilOption = i + 1
			}
			continue
		}
		f(&o)
	}
	return o
}

// Queue puts the job on queue q (default "default").
func Queue(q string) Option { return func(o *options) { o.queue = q } }

// OperationID names the job's side effect. Enqueueing an operation id that
// is already known (in the same queue, within the retention period) returns
// the existing job instead of creating one. Default: the job's own id. A
// job enqueued with an operation id of letters, digits and ._- gets the
// id "=<queue>=<operation id>" (its record is then the only key the
// operation costs); other operation ids get a random job id. An empty id
// is refused with ErrInvalid (leave the option out for the job's own id).
func OperationID(id string) Option { return func(o *options) { o.op, o.opSet = id, true } }

// Delay makes the job due after d (0: due now; a negative d is refused
// with ErrInvalid). A job takes a Delay or a RunAt, not
// both: the two together are refused with ErrInvalid.
func Delay(d time.Duration) Option { return func(o *options) { o.delay = d } }

// RunAt makes the job due at t (a time already past: due at once, one
// before 1970 as at 1970). A job
// takes a Delay or a RunAt, not both: the two together are refused with
// ErrInvalid.
func RunAt(t time.Time) Option { return func(o *options) { o.runAt = t } }

// MaxRetries sets how many retries follow a failed attempt (default 5,
// at most MaxMaxRetries).
func MaxRetries(n int) Option { return func(o *options) { o.maxRetries = n } }

// Timeout bounds each attempt's handler (default, and 0: the pool's
// HandlerTimeout; at most MaxTimeout, rounded up to whole milliseconds; a
// negative d is refused with ErrInvalid).
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Unchecked lets EnqueueRaw take a kind that no live pool runs, whose rules
// are therefore unknown: the caller vouches that it has none (no Validate,
// Resource, Limit, RateLimit, Group or PartitionKey method, no sensitive
// fields). It never overrides what a live pool reports: a kind a live pool
// runs with rules is refused all the same. Enqueue ignores it.
func Unchecked() Option { return func(o *options) { o.unchecked = true } }

// Resource sets the leased resource for EnqueueRaw (typed args declare it
// with a Resource method instead, which wins over the option). An empty r is
// refused with ErrInvalid, not taken for the job itself: a resource built
// from a value left empty would otherwise lease each job alone, and jobs
// meant to exclude each other would run at once; omit the option for a job
// that leases itself.
func Resource(r string) Option { return func(o *options) { o.resource, o.resSet = r, true } }

// Header sets one of the job's headers: a short string the job record
// carries to every attempt of the job, retries and re-runs included
// (Job.Headers, worker middleware), such as a W3C trace context or a
// tenant id. Headers are shown to operators as they are, never redacted:
// put no secret in one. Limits: at most MaxHeaders, keys of letters,
// digits and . _ - up to MaxHeaderKeyLen bytes, values up to
// MaxHeaderValueLen bytes of UTF-8 without control characters,
// MaxHeadersBytes in all. A deduplicated enqueue writes nothing, so its
// headers are dropped.
func Header(key, value string) Option {
	return func(o *options) {
		if o.headers == nil {
			o.headers = map[string]string{}
		}
		o.headers[key] = value
	}
}

// Result reports what Enqueue did.
type Result struct {
	// JobID is the new job's id, or the existing one's when deduplicated.
	JobID string
	// Queue is the job's queue.
	Queue string
	// OperationID is the job's operation id (the existing job's when
	// deduplicated: for a unique key's holder, not the one given).
	OperationID string
	// Deduplicated is true when the operation id was already known, or a
	// job holding the same unique key exists (see Unique), and nothing was
	// written: JobID is the existing job's.
	Deduplicated bool
	// Partition is the queue name of the partition holding the job (see
	// Client.SetPartitions); Queue itself for a queue without partitions.
	Partition string
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
	nsErr        error       // an invalid namespace: every call fails with it
	mw           EnqueueFunc // the enqueue middleware's chain; nil when there is none
	mws          []EnqueueMiddleware
	log          *slog.Logger
	resubmitting atomic.Bool // a background Resubmit runs (Config.ResubmitOnRewind)
	resubmitMore atomic.Bool // a rewind was detected since the background Resubmit last started
	parts        partitionCache
	flow         metrics.FlowLabels // the limit names labelled by fencedq_limit_waits_total
	rdb          redis.UniversalClient
	durability   durable.Options
	replicasRead atomic.Bool    // a durable write read the replicas, or Redis refused the read (replicas.go)
	fencer       fence.Fencer   // Config.Fencer: fences an attempt out before an operator's "not applied"
	leases       *lease.Manager // with fencer: takes a named resource's lease to fence it (fenceout.Attempt)
	afterRead    func()         // tests: called between an operator decision's read (fenceOut) and its write
}

// NewClient returns a Client over rdb. A nil rdb or an invalid Config (a
// Registerer holding a series of one of the client's names with other
// labels or help, say) makes every call fail with an error matching
// ErrInvalid, which names the mistake, instead of panicking; so does every call on a nil or zero
// Client (one NewClient did not make).
func NewClient(rdb redis.UniversalClient, cfg Config) *Client {
	c := &Client{m: metrics.NewClient(cfg.Registerer), nsErr: configErr("NewClient", rdb, cfg),
		rdb: rdb, durability: durable.Options(cfg.Durability)}
	lc := cfg.ledger()
	c.log = lc.Logger
	lc.Recent = cfg.recent()
	lc.OnRewind = func(r Rewind) {
		c.m.CountRewind(ledger.Logical(r.Queue), c.ledger.LossID(r))
		if cfg.ResubmitOnRewind {
			c.resubmitInBackground()
		}
	}
	c.ledger = ledger.New(rdb, lc)
	if cfg.Fencer != nil {
		c.fencer = cfg.Fencer
		c.leases = lease.NewManager(rdb, lease.Config{Namespace: lc.Namespace, Sentinel: cfg.Sentinel,
			Durability: lease.Durability(cfg.Durability), Logger: lc.Logger})
	}
	if err := c.m.Err(); err != nil && c.nsErr == nil {
		c.nsErr = invalid("Config.Registerer: %v", err)
	}
	if len(cfg.EnqueueMiddleware) > 0 && c.nsErr == nil { // nsErr: a nil middleware, say
		c.mws = slices.Clone(cfg.EnqueueMiddleware)
		c.mw, c.nsErr = chain(c.mws, c.write) // a middleware that returns nil fails every call
	}
	return c
}

// Rewind is a detected loss of acknowledged ledger writes on one queue
// (Inspector.Rewinds): Redis came back with older data.
//
// go doc github.com/fencedq/fencedq/internal/ledger.Rewind lists its fields.
type Rewind = ledger.Rewind

// Resubmitted is what Client.Resubmit did for one queue.
//
// go doc github.com/fencedq/fencedq/internal/ledger.Resubmitted lists its fields.
type Resubmitted = ledger.Resubmitted

// Resubmit looks for ledger rewinds on every queue the client enqueued to
// (a call's acknowledgement finds them too) and, for each queue found
// rewound since the last call, enqueues again every recorded enqueue (see
// Config.RecentEnqueues) acknowledged before the rewind was detected (the
// latest, when several were) and less than half the retention period ago
// (the client's Config.Retention, or a pool's shorter one: see there);
// a workflow (workflow.Enqueue) is written again, whole, when its home
// queue lost its record. A job is created again only when
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
	if err := c.err(); err != nil {
		return nil, err
	}
	out, err := c.ledger.Resubmit(ctx)
	for _, r := range out {
		c.m.Resubmitted.WithLabelValues(ledger.Logical(r.Queue)).Add(float64(r.Restored))
	}
	return out, err
}

// resubmitInBackground runs Resubmit in its own goroutine unless one runs
// already; a rewind detected while it runs makes it run again once it is
// done, so the jobs that rewind lost are re-submitted too.
func (c *Client) resubmitInBackground() {
	c.resubmitMore.Store(true)
	if !c.resubmitting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for c.resubmitMore.Swap(false) {
				c.resubmitOnce()
			}
			c.resubmitting.Store(false)
			// A detection between the last Swap and the Store found the
			// goroutine running and left its run to it.
			if !c.resubmitMore.Load() || !c.resubmitting.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

func (c *Client) resubmitOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Resubmit(ctx); err != nil {
		c.log.Error("re-submitting recorded enqueues after a ledger rewind failed; call Client.Resubmit again", "error", err)
	}
}

// Inspector returns the read API over the client's namespace.
func (c *Client) Inspector() *Inspector {
	if c == nil {
		return &Inspector{nsErr: c.err()}
	}
	return &Inspector{l: c.ledger, nsErr: c.err()}
}

// Err returns what every call of c fails with, an error matching
// ErrInvalid: the mistake NewClient found, or a nil or zero Client (one
// NewClient did not make). It is nil for a usable client. Code handed a
// client checks it with Err before it acts on anything else.
func (c *Client) Err() error { return c.err() }

// err is what every call fails with: the mistake NewClient found, or
// ErrInvalid for a nil or zero Client, which NewClient did not make.
func (c *Client) err() error {
	if c == nil || (c.ledger == nil && c.nsErr == nil) {
		return invalid("a nil or zero jobs.Client: create it with NewClient")
	}
	return c.nsErr
}

// Close releases nothing today (the Redis client stays open); it is kept so
// callers can treat the client as a resource.
func (c *Client) Close() error { return nil }

// Enqueue validates args and creates a pending job. Invalid args return an
// error matching ErrInvalid and write nothing. If the operation id is
// already known, the existing job's id is returned with Deduplicated set.
// An enqueue is atomic: a Redis error (matching ErrEnqueueUnknown) means
// the job was written whole or not at all; enqueue again with the same
// OperationID to find out safely. A Redis out of memory (maxmemory
// reached under noeviction) refuses the write before it starts: that error
// matches ErrOutOfMemory, and nothing was written; so does a read-only
// replica (a demoted primary) or a primary short of min-replicas-to-write,
// matching ErrWriteRefused. An enqueue that never reached Redis (no
// connection could be made) fails with an error matching ErrNotSent:
// nothing was written. No other error follows
// a write: when
// only the queue registry (which lists a queue's first job to the
// dashboard, the CLI and the reconciler) could not be updated, Enqueue
// succeeds, and the registry is completed by the client's next enqueue and
// by every pool serving the queue.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts ...Option) (*Result, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	o := optionsOf(opts)
	if c.mw != nil {
		return one(c.viaMiddleware(ctx, []*EnqueueRequest{typedRequest(args, o, false)}))
	}
	j, err := prepareTyped(args, o)
	if err != nil {
		c.rejected(o.queue)
		return nil, err
	}
	return c.insertOne(ctx, j)
}

// EnqueueRaw enqueues a job from its kind and JSON args, for callers without
// the Go type (the CLI, other languages' bridges). The payload must be a JSON
// object, and is shown as is.
//
// Raw JSON cannot run a kind's Go rules, so EnqueueRaw honours them by
// refusing (ErrInvalid, nothing written) a kind that a live pool reports
// with any (a Validate, Resource, Limit, RateLimit, Group or PartitionKey
// method, fields marked sensitive: see KindRules), and a kind no live pool
// runs, whose rules are unknown (also matching ErrUnknownKind):
// enqueue such jobs from Go with their type. Unchecked admits a kind no
// live pool runs, the caller vouching that it has no rules (its args are
// shown as given and it leases the job itself); a kind a live pool reports
// with rules is refused even then.
func (c *Client) EnqueueRaw(ctx context.Context, kind string, payload []byte, opts ...Option) (*Result, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	o := optionsOf(opts)
	if c.mw != nil {
		return one(c.viaMiddleware(ctx, []*EnqueueRequest{rawRequest(kind, payload, o)}))
	}
	j, err := c.prepareRaw(ctx, kind, payload, o)
	if err != nil {
		c.rejected(o.queue)
		return nil, err
	}
	return c.insertOne(ctx, j)
}

// prepareRaw validates a raw enqueue, the kind's rules included. The job
// holds a copy of payload: the client's record of recent enqueues keeps it
// for re-submission after a rewind, and the caller may reuse its buffer
// once the call returns.
func (c *Client) prepareRaw(ctx context.Context, kind string, payload []byte, o options) (*ledger.NewJob, error) {
	if !json.Valid(payload) {
		return nil, invalid("%s args are not valid JSON", kind)
	}
	j, err := prepare(kind, bytes.Clone(payload), nil, o)
	if err != nil {
		return nil, err
	}
	if err := c.checkRaw(ctx, kind, o); err != nil {
		return nil, err
	}
	return j, nil
}

// checkRaw refuses a raw enqueue of a kind with rules, or unknown to every
// live pool unless Unchecked vouches for it (Unchecked never overrides the
// rules a live pool reports). A limit, rate, group or partition key given
// as an option stands in for the kind's method (options win over methods,
// as in Enqueue).
func (c *Client) checkRaw(ctx context.Context, kind string, o options) error {
	pools, err := c.ledger.Pools(ctx)
	if err != nil {
		return fmt.Errorf("%w: reading the kinds' rules: %w", ErrNotSent, err)
	}
	known := false
	for _, p := range pools {
		r, ok := p.Kinds[kind]
		if !ok {
			continue
		}
		known = true
		r.Limit = r.Limit && !o.limitSet
		r.Rate = r.Rate && !o.rateSet
		r.Group = r.Group && !o.groupSet
		r.Partition = r.Partition && o.partitionKey == ""
		if r.Any() {
			hint := ""
			if o.unchecked {
				hint = " (Unchecked vouches only for a kind no live pool runs)"
			}
			return invalid("kind %s has rules raw JSON cannot honour (%s): enqueue it from Go with its type%s", kind, strings.Join(r.Names(), ", "), hint)
		}
	}
	if !known && !o.unchecked {
		return &markedError{mark: ErrUnknownKind, err: invalid("no live pool runs kind %s, so its rules (Validate, Resource, sensitive fields, Limit, RateLimit, Group, PartitionKey) are unknown: start a pool that registers it, enqueue it from Go with its type, or vouch that it has none with the option jobs.Unchecked()", kind)}
	}
	return nil
}

// Params is one job of an EnqueueMany call.
type Params struct {
	// Args are the job's args, as Enqueue takes them.
	Args JobArgs
	// Options are the job's options, as Enqueue takes them.
	Options []Option
}

// String describes the job without its args (which may hold sensitive
// fields), so Params formatted with %v or %+v show no payload.
func (p Params) String() string {
	if argtype.IsNil(p.Args) {
		return "job without args"
	}
	kind, err := kindOf(p.Args)
	if err != nil {
		return "job whose Kind method panics"
	}
	return kind + " job"
}

// LogValue logs the job without its args (see String).
func (p Params) LogValue() slog.Value { return slog.StringValue(p.String()) }

// EnqueueMany validates every job first (one invalid job rejects the whole
// call, nothing written) and then enqueues them all in one round trip per
// pipeline (per queue slot on Redis Cluster), each deduplicated by its
// operation id. A queue's jobs are written in their order, as by one
// Enqueue after another: of jobs sharing an operation id (or a unique key),
// the first is created with its args and options, and the later ones are
// deduplicated to it. Results come in the order of ps. On a Redis error some jobs
// may have been written and others not; each job's write is whole, and
// enqueueing the same operation ids again is safe.
func (c *Client) EnqueueMany(ctx context.Context, ps []Params) ([]*Result, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	if c.mw != nil {
		reqs := make([]*EnqueueRequest, len(ps))
		for i, p := range ps {
			reqs[i] = typedRequest(p.Args, optionsOf(p.Options), true)
		}
		return c.viaMiddleware(ctx, reqs)
	}
	js := make([]*ledger.NewJob, len(ps))
	for i, p := range ps {
		o := optionsOf(p.Options)
		j, err := prepareTyped(p.Args, o)
		if err != nil {
			c.rejected(o.queue)
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		js[i] = j
	}
	return c.insert(ctx, js)
}

func (c *Client) insert(ctx context.Context, js []*ledger.NewJob) ([]*Result, error) {
	c.checkReplicas(ctx)
	if err := c.route(ctx, js); err != nil {
		return make([]*Result, len(js)), err
	}
	ins, err := c.ledger.Insert(ctx, js)
	if errors.Is(err, ErrNotSent) && !errors.Is(err, ErrEnqueueUnknown) {
		err = c.insertElsewhere(ctx, js, ins, err)
	}
	out := make([]*Result, len(js))
	for i, r := range ins {
		if r == nil {
			continue
		}
		q := ledger.Logical(r.Queue)
		out[i] = &Result{JobID: r.JobID, Queue: q, OperationID: r.OperationID, Deduplicated: r.Deduplicated, Partition: r.Queue}
		if r.Deduplicated {
			c.m.Deduplicated.WithLabelValues(q, metrics.StageEnqueue).Inc()
		} else {
			c.m.Enqueued.WithLabelValues(q).Inc()
		}
		if r.Parked && js[i].Flow != nil {
			// parked at its enqueue: a limit wait, as a claim's park is
			c.m.LimitWaits.WithLabelValues(q, c.flowLabel(js[i].Flow.LimitKey)).Inc()
		}
	}
	return out, err
}

// insertElsewhere writes again, each to another partition of its queue,
// the jobs of js that any partition may hold (see spread) and that were
// not written (ins[i] nil) because their partition could not be reached
// (err, matching ErrNotSent and not ErrEnqueueUnknown: every call that
// failed wrote nothing), until each is written or every partition failed:
// a partition whose master is down does not fail the enqueues the others
// can take. It fills ins and returns the error left: nil when every job
// was written, else the last failure.
func (c *Client) insertElsewhere(ctx context.Context, js []*ledger.NewJob, ins []*ledger.Inserted, err error) error {
	failed := map[string]bool{}
	for errors.Is(err, ErrNotSent) && !errors.Is(err, ErrEnqueueUnknown) {
		moved := c.rerouteUnsent(js, ins, failed)
		if len(moved) == 0 {
			return err
		}
		again := make([]*ledger.NewJob, len(moved))
		for k, i := range moved {
			again[k] = js[i]
		}
		got, rerr := c.ledger.Insert(ctx, again)
		for k, i := range moved {
			ins[i] = got[k]
		}
		if rerr != nil {
			err = rerr
			continue
		}
		if !slices.Contains(ins, nil) {
			return nil
		}
	}
	return err
}

// flowLabel is the metric label of limit key's name (its part before the
// first ':'; see metrics.FlowLabels), warning once when names start
// counting as "other".
func (c *Client) flowLabel(key string) string {
	label, first := c.flow.Label(metrics.FlowKeyName(key))
	if first {
		c.log.Warn("more distinct limit names than metric labels allow; the rest count as \""+metrics.OtherFlowName+"\": name a flow key's fixed part before a ':' (\"export:<customer>\")",
			"labels", metrics.MaxFlowNameLabels)
	}
	return label
}

func (c *Client) insertOne(ctx context.Context, j *ledger.NewJob) (*Result, error) {
	out, err := c.insert(ctx, []*ledger.NewJob{j})
	return out[0], err
}

// rejected counts an invalid enqueue on queue q.
func (c *Client) rejected(q string) {
	if ValidateQueue(q) != nil {
		q = "invalid" // never a user-given value as a label
	}
	c.m.Rejected.WithLabelValues(q, metrics.ReasonInvalid).Inc()
}

func prepareTyped(args JobArgs, o options) (*ledger.NewJob, error) {
	if argtype.IsNil(args) { // a nil pointer too: its Kind may not be callable
		return nil, invalid("nil args")
	}
	kind, err := kindOf(args)
	if err != nil {
		return nil, err
	}
	if o.argsErr != nil {
		return nil, o.argsErr
	}
	if v, ok := args.(Validator); ok {
		var verr error
		if err := guard(args, "Validate", func() { verr = v.Validate() }); err != nil {
			return nil, err
		}
		if verr != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, kind, RedactError(args, verr))
		}
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, invalid("%s args do not encode as JSON: %s", kind, RedactText(args, err.Error()))
	}
	display := payload // args that can hold no sensitive field are shown as encoded
	if !plainType(reflect.TypeOf(args)) {
		if display, err = RedactJSON(args); err != nil {
			return nil, invalid("%s args: %s", kind, RedactText(args, err.Error()))
		}
	}
	if err := checkUniqueFields(args, kind, o.unique); err != nil {
		return nil, err
	}
	if k, ok := args.(Partitioner); ok && o.partitionKey == "" {
		if err := guard(args, "PartitionKey", func() { o.partitionKey = k.PartitionKey() }); err != nil {
			return nil, err
		}
	}
	if err := flowArgs(args, &o); err != nil {
		return nil, err
	}
	if err := groupArgs(args, &o); err != nil {
		return nil, err
	}
	if r, ok := args.(Resourcer); ok {
		var res string
		if err := guard(args, "Resource", func() { res = r.Resource() }); err != nil {
			return nil, err
		}
		if res == "" {
			return nil, invalid("%s: Resource() returned an empty resource", kind)
		}
		o.resource = res
	}
	// its errors may quote what the args' methods returned (a resource,
	// a group), built from sensitive values
	j, err := prepare(kind, payload, display, o)
	return j, redactRefusal(args, err, kind, o.op, o.resource, o.group, o.queue,
		metrics.FlowKeyName(o.limitKey), metrics.FlowKeyName(o.rateKey))
}

// redactRefusal is RedactError for an error of prepare, which quotes a
// refused name cut to 64 bytes (ledger.Clip): redacting the cut text would
// miss a sensitive value the cut splits, and show its first bytes. So
// each of names the text quotes cut is quoted redacted whole, then cut
// (a limit or rate is named by its key's name: see flowNamed).
func redactRefusal(args JobArgs, err error, names ...string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	for _, n := range names {
		if cut := ledger.Clip(n); cut != n {
			text = strings.ReplaceAll(text, strconv.Quote(cut), strconv.Quote(ledger.Clip(RedactText(args, n))))
		}
	}
	if text = RedactText(args, text); text != err.Error() {
		return &redactedError{text: text, err: err}
	}
	return err
}

// guard runs fn, a call of args' method method, and turns a panic there
// into an error matching ErrInvalid, the args' sensitive values hidden in
// its value's text: the enqueue fails before anything is written.
// kindOf returns args' kind, or ErrInvalid when its Kind method panics.
func kindOf(args JobArgs) (kind string, err error) {
	err = guard(args, "Kind", func() { kind = args.Kind() })
	return kind, err
}

func guard(args JobArgs, method string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = invalid("%T's %s method panicked: %s", args, method, ledger.Clip(RedactText(args, fmt.Sprint(r))))
		}
	}()
	fn()
	return nil
}

// prepare validates everything before anything is written. payload is
// valid JSON.
func prepare(kind string, payload, display []byte, o options) (*ledger.NewJob, error) {
	if err := ValidateKind(kind); err != nil {
		return nil, err
	}
	switch {
	case o.nilOption > 0:
		return nil, invalid("option %d of the enqueue is nil", o.nilOption-1)
	case len(payload) > MaxPayloadBytes:
		return nil, invalid("payload of %d bytes exceeds %d", len(payload), MaxPayloadBytes)
	case !argtype.StartsObject(payload): // valid JSON: checked by EnqueueRaw, produced by Marshal
		return nil, invalid("%s args must be a JSON object", kind)
	case o.maxRetries < 0 || o.maxRetries > MaxMaxRetries:
		return nil, invalid("max retries %d is outside 0-%d", o.maxRetries, MaxMaxRetries)
	case o.timeout < 0:
		return nil, invalid("timeout %v is negative", o.timeout)
	case o.delay < 0:
		return nil, invalid("delay %v is negative (RunAt takes a time already past: due at once)", o.delay)
	case o.delay != 0 && !o.runAt.IsZero():
		return nil, invalid("both a delay (%v) and a run-at time: give one", o.delay)
	case o.timeout > MaxTimeout:
		return nil, invalid("timeout %v exceeds %v", o.timeout, MaxTimeout)
	case o.delay > MaxDelay || (!o.runAt.IsZero() && time.Until(o.runAt) > MaxDelay):
		return nil, invalid("a job can be scheduled at most %v ahead", MaxDelay)
	}
	if o.op != "" || o.opSet { // OperationID("") is refused, not taken for none
		if err := ValidateOperationID(o.op); err != nil {
			return nil, err
		}
	}
	if o.resSet && o.resource == "" {
		return nil, invalid("empty resource: give Resource the resource the job leases, or leave the option out for a job that leases itself")
	}
	if o.resource != "" {
		if err := ValidateResource(o.resource); err != nil {
			return nil, err
		}
	}
	if err := ValidateQueue(o.queue); err != nil {
		return nil, err
	}
	if err := ledger.ValidateHeaders(o.headers); err != nil {
		return nil, err
	}
	var uniq *ledger.Unique
	if o.unique != nil {
		u, err := uniqueOf(kind, payload, o.unique)
		if err != nil {
			return nil, err
		}
		uniq = u
	}
	flow, err := flowOf(&o)
	if err != nil {
		return nil, err
	}
	if o.group != "" {
		if err := ValidateGroup(o.group); err != nil {
			return nil, err
		}
	}
	if o.partitionKey == "" {
		o.partitionKey = o.group // a group lives within one partition
	}
	if len(o.partitionKey) > MaxPartitionKeyLen {
		return nil, invalid("partition key of %d bytes exceeds %d", len(o.partitionKey), MaxPartitionKeyLen)
	}
	if display == nil {
		display = payload
	}
	delay := roundUpMS(o.delay)
	if !o.runAt.IsZero() {
		// A wall-clock time: the caller's clock says how far off it is. The
		// ledger keeps Unix milliseconds, so a time before 1970 is due as
		// at 1970; the delay then never saturates, which a re-submission
		// (Resubmit subtracts the time since) would wrap centuries ahead.
		at := o.runAt
		if at.Before(minRunAt) {
			at = minRunAt
		}
		delay = time.Until(at)
	}
	id := ledger.OpJobID(o.queue, o.op) // an operation id that names its job: no operation key
	if id == "" {
		id = uuid.NewString()
	}
	return &ledger.NewJob{
		ID: id, Kind: kind, Queue: o.queue, OperationID: o.op, Resource: o.resource,
		Payload: payload, Display: display, MaxRetries: o.maxRetries, Timeout: roundUpMS(o.timeout), Delay: delay,
		Headers: o.headers, Unique: uniq, Flow: flow, Group: o.group, PartitionKey: o.partitionKey,
	}, nil
}

// minRunAt is the earliest due time a RunAt keeps (earlier ones are due as
// at it): the first millisecond after the Unix epoch.
var minRunAt = time.UnixMilli(1)

// roundUpMS rounds a positive duration up to whole milliseconds, the unit
// the ledger stores.
func roundUpMS(d time.Duration) time.Duration {
	if r := d % time.Millisecond; d > 0 && r != 0 {
		d += time.Millisecond - r
	}
	return d
}

func init() {
	clientledger.Of = func(c any) (*ledger.Ledger, error) {
		if c, ok := c.(*Client); ok && c != nil {
			return c.ledger, c.err()
		}
		return nil, nil
	}
	clientledger.Operator = func(c any, queue, actor, note string) (string, error) {
		cl, ok := c.(*Client)
		if !ok || cl == nil {
			return "", invalid("not a *jobs.Client")
		}
		return cl.operator(queue, actor, note)
	}
	clientledger.Route = func(ctx context.Context, c any, js []*ledger.NewJob) error {
		if c, ok := c.(*Client); ok && c != nil {
			c.checkReplicas(ctx)
			return c.route(ctx, js)
		}
		return nil
	}
	clientledger.Through = func(ctx context.Context, c any, steps []string, args []any, opts []any, write func(context.Context, []any) ([]clientledger.Written, error)) error {
		cl, ok := c.(*Client)
		if !ok || cl == nil {
			return invalid("not a *jobs.Client")
		}
		if len(cl.mws) == 0 {
			_, err := write(ctx, opts)
			return err
		}
		return cl.through(ctx, steps, args, opts, write)
	}
}
