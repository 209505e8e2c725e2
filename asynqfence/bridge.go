package asynqfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/watchdog"
	"github.com/fencedq/fencedq/jobs"
)

// BridgeName marks bridged jobs in the ledger (jobs.Record.Bridge).
const BridgeName = "asynq"

// OperationHeader is the asynq task header that carries an operation id.
// A task with it is the ledger job of that id (so enqueueing the same
// operation twice, under two asynq task ids, runs its effect once); a task
// without it is the ledger job of its asynq task id.
const OperationHeader = "fencedq-operation-id"

// JobHeader is the asynq task header naming the ledger job a task
// delivers; Redeliver sets it on the tasks it enqueues. It wins over the
// operation id and the task id. A task whose type is not the kind of the
// bridged job it names (by this header, its operation id or its task id)
// is refused with an error matching jobs.ErrInvalid and wrapping
// asynq.SkipRetry; the job is left as it was.
const JobHeader = "fencedq-job-id"

// Defaults for Options' zero fields.
const (
	// DefaultLeaseTTL is the attempt's lease in the ledger. It is shorter
	// than the time asynq takes to redeliver the task of a silent server (its
	// 30 s lease, then its recoverer's 30 s margin), so a redelivered task
	// finds the previous attempt's lease expired.
	DefaultLeaseTTL = 30 * time.Second
	// DefaultMaxReconcileTries is how many "cannot tell" answers send a job
	// to review.
	DefaultMaxReconcileTries = 5
	// DefaultReconcileTimeout bounds one Reconcile or effect-log call.
	DefaultReconcileTimeout = 10 * time.Second
	// DefaultRedeliverInterval is how often Run looks for jobs whose asynq
	// task is gone.
	DefaultRedeliverInterval = 10 * time.Second
	// MinLeaseTTL is the shortest LeaseTTL New accepts (as worker.MinLeaseTTL).
	MinLeaseTTL = 100 * time.Millisecond
	// MaxLeaseTTL is the longest LeaseTTL New accepts (as worker.MaxLeaseTTL).
	MaxLeaseTTL = 24 * time.Hour
	// MinRedeliverInterval is the shortest RedeliverInterval New accepts:
	// a shorter one turns Run into a busy loop of Redis calls.
	MinRedeliverInterval = 10 * time.Millisecond
)

// Errors returned to asynq (each wraps the details). asynq retries the task
// after an error, unless it wraps asynq.SkipRetry.
var (
	// ErrBusy means another attempt holds the job's lease in the ledger: the
	// delivery did not run (asynq retries it later).
	ErrBusy = errors.New("asynqfence: another attempt holds the job's lease")
	// ErrUncertain means the job's outcome is not known: asynq delivers it
	// again later, and that delivery asks the kind's Reconcile or the effect
	// log before anything runs.
	ErrUncertain = errors.New("asynqfence: outcome uncertain, reconciled before the task runs again")
	// ErrReview means the job is held for an operator's decision; it wraps
	// asynq.SkipRetry, so asynq archives the task.
	ErrReview = errors.New("asynqfence: job held for review")
	// ErrSuperseded means the ledger refused the delivery's outcome while
	// the job is not finished: another attempt's token owns it, or the
	// delivery's lease expired before the commit and the job left running
	// under its token (uncertain, maybe reconciled since; the wrapped text
	// says which). asynq keeps the task and delivers it again; that
	// delivery finds the job final, busy, or expired and reconciles it
	// before anything runs.
	ErrSuperseded = errors.New("asynqfence: the ledger refused the outcome of the unfinished job")
	// ErrGone means the ledger no longer holds the job of an attempt that
	// failed or ended uncertain (a Redis that came back with older data
	// lost it): asynq keeps the task and delivers it again, and that
	// delivery records the job afresh; acknowledging the task would drop
	// the job. It wraps the handler's error, so a handler's asynq.SkipRetry
	// still archives the task.
	ErrGone = errors.New("asynqfence: the ledger lost the job of an attempt that did not succeed")
	// ErrPaused means the ledger queue is paused: the delivery did not run
	// (asynq retries it later). A job seen for the first time is recorded,
	// pending, so that Redeliver gives it a new task after the resume
	// should asynq have archived this one meanwhile.
	ErrPaused = errors.New("asynqfence: queue paused")
	// ErrNotClaimed means the delivery's claim failed in the ledger (Redis
	// unreachable, or too few replicas acknowledged it in durable mode, in
	// which case its job was put back, its attempt not consumed): nothing
	// ran, and asynq retries the task.
	ErrNotClaimed = errors.New("asynqfence: the ledger did not grant the delivery an attempt")
	// ErrConflict means a native fencedq job (or another job owning the
	// operation id) has the task's id; it wraps asynq.SkipRetry.
	ErrConflict = errors.New("asynqfence: the id belongs to another job")
	// ErrNoAttempt means a handler that needs a fenced attempt ran without
	// the bridge's middleware.
	ErrNoAttempt = errors.New("asynqfence: no fenced attempt in the context (wrap the handler with the bridge's middleware)")
	// ErrOptions means Options are invalid.
	ErrOptions = errors.New("asynqfence: invalid options")
)

// errUnmade is what a Bridge New did not make returns.
var errUnmade = fmt.Errorf("%w: a nil or zero *Bridge: create it with New", ErrOptions)

// unmade reports whether b is nil or a zero Bridge, not made by New.
func (b *Bridge) unmade() bool { return b == nil || b.ledger == nil }

// ReconcileFunc tells whether an uncertain job's effect happened.
//
// go doc github.com/fencedq/fencedq/internal/attempt.ReconcileFunc lists its signature.
type ReconcileFunc = attempt.ReconcileFunc

// TaskReconciler is implemented by handlers that can tell whether an
// uncertain job's effect happened (Handler implements it for workers with
// a Reconcile method). The bridge asks it before the effect log, with
// the job's record carrying the delivering task's headers (Record.Headers),
// as Options.Reconcile's functions get it.
type TaskReconciler interface {
	ReconcileTask(ctx context.Context, rec *jobs.Record) (jobs.Verdict, error)
}

// Options configure a Bridge. The zero value is usable: a zero field takes
// its default; a negative duration or count is refused by New.
type Options struct {
	// WorkerID names this asynq server in the ledger (attempt owners and
	// fence owners); default host:pid.
	WorkerID string
	// LeaseTTL is each attempt's lease in the ledger (default
	// DefaultLeaseTTL; from MinLeaseTTL to MaxLeaseTTL); it is renewed every third of
	// it while the handler runs.
	LeaseTTL time.Duration
	// SafetyMargin is how long before its lease's nominal end an attempt
	// stops trusting a lease it could not confirm: when no renewal was
	// confirmed by the local deadline (the send time of the claim or of the
	// last confirmed renewal + LeaseTTL - SafetyMargin), the handler's
	// context is cancelled with a cause matching lease.ErrLost, even if
	// Redis is unreachable. It covers clock drift between this process and
	// Redis (default: a tenth of LeaseTTL, at least 10ms, never more than
	// half of it; a margin above half of LeaseTTL is refused by New).
	SafetyMargin time.Duration
	// Queue maps an asynq queue to its ledger queue (default: the same name).
	Queue func(asynqQueue string) string
	// OperationID returns the operation id a task carries, "" for none
	// (default: the OperationHeader header).
	OperationID func(t *asynq.Task) string
	// EffectLog answers for kinds without a Reconcile (e.g. a pgfence.Store).
	EffectLog fence.EffectLog
	// Reconcile returns a kind's Reconcile for plain asynq handlers (nil:
	// none); a handler implementing TaskReconciler answers first.
	Reconcile func(kind string) ReconcileFunc
	// MaxReconcileTries is how many "cannot tell" answers send a job to
	// review (default DefaultMaxReconcileTries).
	MaxReconcileTries int
	// ReconcileTimeout bounds one Reconcile or effect-log call (default
	// DefaultReconcileTimeout).
	ReconcileTimeout time.Duration
	// Logger receives the bridge's logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the bridge's metrics, the same series native pools
	// export (default: none are exported).
	Registerer prometheus.Registerer
	// Asynq is the Redis asynq keeps its tasks in, which Redeliver reads
	// and enqueues to (default: the ledger's Redis given to New).
	Asynq redis.UniversalClient
	// RedeliverInterval is how often Run calls Redeliver (default
	// DefaultRedeliverInterval; at least MinRedeliverInterval).
	RedeliverInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Queue == nil {
		o.Queue = func(q string) string { return q }
	}
	if o.OperationID == nil {
		o.OperationID = func(t *asynq.Task) string { return t.Headers()[OperationHeader] }
	}
	if o.MaxReconcileTries == 0 {
		o.MaxReconcileTries = DefaultMaxReconcileTries
	}
	if o.ReconcileTimeout == 0 {
		o.ReconcileTimeout = DefaultReconcileTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RedeliverInterval == 0 {
		o.RedeliverInterval = DefaultRedeliverInterval
	}
	return o
}

// checkSigns refuses negative durations and counts, as worker.NewPool does
// (zero means the default).
func (o Options) checkSigns() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"lease TTL", o.LeaseTTL}, {"safety margin", o.SafetyMargin},
		{"reconcile timeout", o.ReconcileTimeout}, {"redeliver interval", o.RedeliverInterval},
	} {
		if f.d < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrOptions, f.name, f.d)
		}
	}
	if o.MaxReconcileTries < 0 {
		return fmt.Errorf("%w: max reconcile tries %d is negative", ErrOptions, o.MaxReconcileTries)
	}
	return nil
}

// Bridge runs asynq deliveries as fenced attempts in a fencedq ledger.
// Create it with New; install Middleware on an asynq.ServeMux.
type Bridge struct {
	ledger  *ledger.Ledger
	rdb     redis.UniversalClient
	opts    Options
	margin  time.Duration // the attempts' safety margin (watchdog.Margin of the options')
	log     *slog.Logger
	metrics *metrics.Set
	queues  sync.Map // ledger queues registered by this bridge
	kinds   kinds    // task types labelled by name (kindLabel)
	layouts layouts  // partitioned ledger queues' layouts (jobQueue)
}

// New returns a bridge that keeps its attempts in the ledger of cfg's
// namespace on rdb (the namespace and retention of the jobs.Client and
// pools sharing it). It fails with ErrOptions on a nil rdb (or Options.Asynq), an invalid
// namespace, an invalid worker id, a negative duration or count, a LeaseTTL
// or RedeliverInterval below its minimum, a SafetyMargin above half the
// LeaseTTL, or a Registerer that refuses one of its series (one of the
// same name registered there with other labels or help).
// With cfg.Sentinel it asks the Sentinels (each for at most a second) and
// fails with ErrOptions, naming it, on a master name none that answers
// monitors (matching lease.ErrUnknownMaster) or an address a Redis server
// answers that is not a Sentinel (lease.ErrNotSentinel). With
// cfg.Durability it logs at error level, once and in the background, when
// the primary has fewer replicas online than required.
func New(rdb redis.UniversalClient, cfg jobs.Config, opts Options) (*Bridge, error) {
	if argtype.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrOptions)
	}
	if opts.Asynq != nil && argtype.IsNil(opts.Asynq) {
		return nil, fmt.Errorf("%w: Options.Asynq is a nil %T", ErrOptions, opts.Asynq)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if err := cfg.ValidateClient(rdb); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if err := opts.checkSigns(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	opts = opts.withDefaults()
	if len(opts.WorkerID) > 200 {
		return nil, fmt.Errorf("%w: worker id longer than 200 bytes", ErrOptions)
	}
	if opts.LeaseTTL < MinLeaseTTL {
		return nil, fmt.Errorf("%w: lease TTL %v below %v", ErrOptions, opts.LeaseTTL, MinLeaseTTL)
	}
	if opts.LeaseTTL > MaxLeaseTTL {
		return nil, fmt.Errorf("%w: lease TTL %v above %v", ErrOptions, opts.LeaseTTL, MaxLeaseTTL)
	}
	if opts.RedeliverInterval < MinRedeliverInterval {
		return nil, fmt.Errorf("%w: redeliver interval %v below %v", ErrOptions, opts.RedeliverInterval, MinRedeliverInterval)
	}
	if err := watchdog.CheckMargin(opts.LeaseTTL, opts.SafetyMargin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	if opts.Asynq == nil {
		opts.Asynq = rdb
	}
	b := &Bridge{
		rdb: rdb, opts: opts, margin: watchdog.Margin(opts.LeaseTTL, opts.SafetyMargin), metrics: metrics.NewClient(opts.Registerer),
		log: opts.Logger.With("worker", opts.WorkerID, "bridge", BridgeName),
	}
	if err := b.metrics.Err(); err != nil {
		return nil, fmt.Errorf("%w: Options.Registerer: %w", ErrOptions, err)
	}
	// Completions check the ledger for a rewind (a Redis that came back
	// with older data): logged, recorded and counted.
	b.ledger = ledger.New(rdb, ledger.Config{Namespace: cfg.Namespace, Retention: cfg.Retention,
		Sentinel: cfg.Sentinel, Logger: b.log, Name: opts.WorkerID, Durability: durable.Options(cfg.Durability),
		OnRewind: func(r ledger.Rewind) { b.metrics.CountRewind(ledger.Logical(r.Queue), b.ledger.LossID(r)) }})
	if cfg.Sentinel != nil {
		// A master name no Sentinel monitors, or an address that is a
		// Redis server and not a Sentinel, fails every claim: refuse it
		// here, naming it, as a pool's Run does. Sentinels that do not
		// answer (each asked for at most a second) are an outage: claims
		// retry.
		ctx, cancel := context.WithTimeout(context.Background(), startCheckTimeout)
		err := b.ledger.CheckSentinels(ctx)
		cancel()
		if errors.Is(err, epoch.ErrUnknownMaster) || errors.Is(err, epoch.ErrNotSentinel) {
			return nil, fmt.Errorf("%w: jobs.Config.Sentinel: %w", ErrOptions, err)
		}
	}
	if cfg.Durability.Replicas > 0 {
		// Too few replicas fail every durable claim and completion: said
		// once, in the background (New does not wait for Redis).
		go b.checkReplicas(durable.Options(cfg.Durability))
	}
	return b, nil
}

// startCheckTimeout bounds New's checks of the Sentinels and replicas.
const startCheckTimeout = 5 * time.Second

// checkReplicas logs at error level, with both counts, when the primary
// (each master of a Redis Cluster) has fewer replicas online than d
// requires; replicas may connect later, so nothing is refused.
func (b *Bridge) checkReplicas(d durable.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), startCheckTimeout)
	defer cancel()
	short, _ := durable.Shortfalls(ctx, b.rdb, d)
	for _, s := range short {
		b.log.Error("fewer Redis replicas are connected than jobs.Config.Durability.Replicas requires: every durable claim and completion "+
			"of the bridge fails (not acknowledged) until enough replicas connect",
			"primary", s.Addr, "replicas_connected", s.Connected, "replicas_required", s.Required)
	}
}

// Middleware returns New(rdb, cfg, opts).Middleware(). With invalid
// options, every delivery fails with the error matching ErrOptions (and is
// logged).
func Middleware(rdb redis.UniversalClient, cfg jobs.Config, opts Options) asynq.MiddlewareFunc {
	b, err := New(rdb, cfg, opts)
	if err != nil {
		slog.Error("asynq bridge not configured", "error", err)
		return func(asynq.Handler) asynq.Handler {
			return asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return err })
		}
	}
	return b.Middleware()
}

// Middleware returns the bridge as asynq middleware (asynq.ServeMux.Use).
// Install it last, so that next is the task's own handler: a handler
// implementing TaskReconciler is asked about its uncertain tasks. It may
// also wrap a whole ServeMux (asynq.Server.Run(mw(mux))). The middleware of
// a nil or zero Bridge (one New did not make) fails every delivery with
// ErrOptions, running nothing; asynq retries the task. Installed twice on
// one chain, the inner one runs next under the outer one's attempt.
func (b *Bridge) Middleware() asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			if b.unmade() {
				return errUnmade
			}
			if _, ok := AttemptFromContext(ctx); ok {
				// Installed twice on one chain: the outer delivery's
				// attempt is this task's (a second claim would find the
				// job busy under it).
				return next.ProcessTask(ctx, t)
			}
			report(ctx, Report{}) // nothing ran, unless an attempt reports otherwise
			return b.process(ctx, t, next)
		})
	}
}

// register adds q to the ledger's queue registry once per process, so the
// reconciler, the dashboard and the CLI see it.
func (b *Bridge) register(ctx context.Context, q string) {
	if _, ok := b.queues.Load(q); ok {
		return
	}
	if err := b.ledger.RegisterQueues(ctx, q); err != nil {
		b.log.Warn("could not register the ledger queue", "queue", q, "error", err)
		return
	}
	b.queues.Store(q, true)
}

// process handles one asynq delivery: claim a fenced attempt, or decide
// what a delivery of a job already seen means.
func (b *Bridge) process(ctx context.Context, t *asynq.Task, next asynq.Handler) error {
	taskID, ok := asynq.GetTaskID(ctx)
	if !ok {
		return fmt.Errorf("%w: the context carries no asynq task id (run the handler under an asynq.Server)", ErrNoAttempt)
	}
	aq, _ := asynq.GetQueueName(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	q := b.opts.Queue(aq)
	d := ledger.Delivery{
		ID: taskID, Kind: t.Type(), Payload: t.Payload(), MaxRetries: maxRetry,
		Owner: b.opts.WorkerID, TTL: b.opts.LeaseTTL, Bridge: BridgeName, TaskQueue: aq, TaskID: taskID,
		Headers: keptHeaders(t.Headers()),
	}
	if len(d.Payload) > jobs.MaxPayloadBytes {
		// As Enqueue refuses it: nothing is written, asynq archives the task.
		b.metrics.Rejected.WithLabelValues(queueLabel(q), metrics.ReasonInvalid).Inc()
		// Type, task id and queue are not checked yet: quoted cut, as refused names are.
		b.log.Warn("task refused: payload too large", "queue", ledger.Clip(q), "kind", ledger.Clip(t.Type()), "task_id", ledger.Clip(taskID),
			"bytes", len(d.Payload), "max", jobs.MaxPayloadBytes)
		return fmt.Errorf("asynqfence: %w: payload of %d bytes exceeds %d: %w",
			jobs.ErrInvalid, len(d.Payload), jobs.MaxPayloadBytes, asynq.SkipRetry)
	}
	if id := t.Headers()[JobHeader]; id != "" {
		d.ID = id // a task Redeliver enqueued
	} else if op := b.opts.OperationID(t); op != "" {
		// The job is named by its operation, which a native enqueue of the
		// same operation id then finds (and a native job holding it first
		// makes this delivery a conflict).
		d.ID, d.OperationID = op, op
	}
	if dl, ok := ctx.Deadline(); ok {
		d.Timeout = time.Until(dl).Round(time.Millisecond)
	}
	if err := validDelivery(q, d); err != nil {
		// As Enqueue refuses it, before anything is recorded (the queue's
		// registration included); asynq archives the task.
		b.metrics.Rejected.WithLabelValues(queueLabel(q), metrics.ReasonInvalid).Inc()
		// The names are not all valid: quoted cut.
		b.log.Warn("task refused: invalid name; asynq archives it", "queue", ledger.Clip(q), "kind", ledger.Clip(t.Type()),
			"job_id", ledger.Clip(d.ID), "task_id", ledger.Clip(taskID), "error", err)
		return fmt.Errorf("asynqfence: %w: %w", err, asynq.SkipRetry)
	}
	// On a partitioned queue, the partition holding the job, or the one a
	// native enqueue of its operation goes to.
	pq, err := b.jobQueue(ctx, q, d.ID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotClaimed, err)
	}
	q = pq
	b.register(ctx, q)
	log := b.log.With("queue", q, "kind", d.Kind, "job_id", d.ID, "task_id", taskID)
	// At most: uncertain -> re-run decided -> claimed, with one more look
	// if another process decided meanwhile.
	for range 3 {
		sent := time.Now()
		dc, err := b.ledger.ClaimDelivery(ctx, q, d)
		if err != nil {
			if errors.Is(err, jobs.ErrInvalid) {
				b.metrics.Rejected.WithLabelValues(queueLabel(q), metrics.ReasonInvalid).Inc()
				log.Warn("task refused by the ledger; asynq archives it", "error", err)
				return fmt.Errorf("asynqfence: %w: %w", err, asynq.SkipRetry)
			}
			if dc != nil && dc.Status == ledger.DeliveryClaimed {
				// Too few replicas acknowledged the claim: its attempt
				// does not start.
				b.putBack(ctx, dc.Claimed, log)
			}
			return fmt.Errorf("%w: %w", ErrNotClaimed, err)
		}
		switch dc.Status {
		case ledger.DeliveryClaimed:
			return b.run(ctx, t, next, dc.Claimed, sent, log)
		case ledger.DeliveryFinal:
			b.metrics.Deduplicated.WithLabelValues(ledger.Logical(q), metrics.StageExecute).Inc()
			log.Info("duplicate delivery of a finished job acknowledged without running the handler", "job_state", dc.State)
			return nil
		case ledger.DeliveryBusy:
			return fmt.Errorf("%w: %s holds it until %s", ErrBusy, dc.Owner, dc.Deadline.Format(time.RFC3339Nano))
		case ledger.DeliveryPaused:
			return fmt.Errorf("%w: %s", ErrPaused, q)
		case ledger.DeliveryConflict:
			b.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonInvalid).Inc()
			log.Warn("task refused: its job id belongs to another job (a native one, or another operation's); asynq archives it",
				"job_state", dc.State)
			return fmt.Errorf("%w: job %s in queue %s (%s): %w", ErrConflict, d.ID, q, dc.State, asynq.SkipRetry)
		case ledger.DeliveryUnresolved:
			if dc.State == jobs.Review {
				log.Warn("task refused: its job is held for review; asynq archives it (run it again in asynq after the operator's decision)")
				return fmt.Errorf("%w: job %s in queue %s: %w", ErrReview, d.ID, q, asynq.SkipRetry)
			}
			rerun, err := b.reconcile(ctx, q, d.ID, t, next, dc.ReconcileTries, log)
			if err != nil || !rerun {
				return err
			}
		}
	}
	return fmt.Errorf("%w: job %s changed state while being delivered", ErrBusy, d.ID)
}

// putBack returns the job of attempt c, which did not start because too
// few replicas acknowledged its claim, to pending with its attempt not
// consumed, so the task's next delivery claims it at once. A put-back that
// fails leaves the job to lease expiry: its next delivery after that
// reconciles it.
func (b *Bridge) putBack(ctx context.Context, c ledger.Claimed, log *slog.Logger) {
	const reason = "the claim was not acknowledged by enough replicas"
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := b.ledger.Complete(cctx, c.Queue, []ledger.Completion{{ID: c.ID, Token: c.Token,
		Outcome: ledger.Outcome{Defer: true, Reason: reason}}})
	switch {
	case errors.Is(err, durable.ErrUnacknowledged):
		log.Warn("claimed job put back without starting; too few replicas acknowledged the put-back, so after a failover it may come back when its lease expires",
			"reason", reason, "error", err)
	case err != nil:
		log.Warn("claimed job not started could not be put back; it comes back when its lease expires",
			"reason", reason, "error", err)
	default:
		log.Info("claimed job put back without starting", "reason", reason)
	}
}

// IsFailure is for asynq.Config.IsFailure on servers whose handlers the
// bridge wraps: a delivery the ledger did not let run (ErrBusy, ErrPaused,
// ErrNotClaimed) is not a failure, so asynq retries its task without
// spending one of its retries (nor counting it in the queue's failed
// stats); any other non-nil error is, as asynq counts it by default.
//
//	srv := asynq.NewServer(redisOpt, asynq.Config{IsFailure: asynqfence.IsFailure})
func IsFailure(err error) bool {
	if err == nil {
		return false
	}
	return !errors.Is(err, ErrBusy) && !errors.Is(err, ErrPaused) && !errors.Is(err, ErrNotClaimed)
}

// validDelivery checks the names of delivery d into ledger queue q by the
// rules the ledger's claim applies, and refuses a job id starting with "="
// (an error matching jobs.ErrInvalid), so that a refused delivery registers
// no queue.
func validDelivery(q string, d ledger.Delivery) error {
	if err := ledger.ValidateQueue(q); err != nil {
		return err
	}
	if err := ledger.ValidateJobID(d.ID); err != nil {
		return err
	}
	if strings.HasPrefix(d.ID, "=") {
		// The ledger's name for the job of a native operation id
		// (ledger.OpJobID): recorded, a bridged job would take it.
		return fmt.Errorf("%w: job id %q: a leading \"=\" names the job of a native operation id", jobs.ErrInvalid, ledger.Clip(d.ID))
	}
	return ledger.ValidateKind(d.Kind)
}
