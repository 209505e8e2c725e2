package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/argtype"
	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/watchdog"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// ErrRegistered means a worker for the kind is already registered.
var ErrRegistered = errors.New("worker: kind already registered")

// ErrNilWorker means Register was given a nil worker (a nil interface,
// function or pointer).
var ErrNilWorker = errors.New("worker: nil worker")

// ErrRedisUnusable means Run reached the pool's Redis but the server cannot
// serve the pool as the client is set up: it refused the client's
// credentials or their permissions (NOAUTH, WRONGPASS, NOPERM: set
// Username and Password in the redis.Options the client was built with),
// or it is older than Redis 6.2, the oldest release fencedq runs on.
// The error names the server's address and keeps the server's reply (for
// redis.IsAuthError and redis.IsPermissionError); Run may be called again.
var ErrRedisUnusable = errors.New("worker: the Redis server cannot serve the pool")

// ErrRunning means the pool is running or has run: register workers before
// Run, and run a pool once (build another with NewPool to run again). A Run
// that failed to start (it returned an error before claiming anything)
// leaves the pool as it was: Run may be called again. A Run that returned
// nil has run, even when its context ended before the pool started.
var ErrRunning = errors.New("worker: pool is running or has run (a pool runs once: build another with NewPool)")

// ErrDuplicateWorkerID means Run found a live heartbeat of the pool's
// WorkerID from another pool (another process, or another Pool of this
// one): one refreshed while Run watched it. Each live pool needs its own
// WorkerID. The heartbeat of a pool that stopped is gone at once; Run
// waits for one of a pool that crashed to lapse (within three heartbeat
// intervals, 15 s) and then starts.
var ErrDuplicateWorkerID = errors.New("worker: another live pool has this WorkerID (each live pool needs its own)")

// errMalformed marks a payload that does not decode into the kind's args.
var errMalformed = errors.New("worker: malformed payload")

// handler is a registered kind with its types erased.
type handler struct {
	kind string
	// run decodes payload into the kind's args and calls the worker,
	// wrapped in the pool's middleware.
	run runFunc
	// reconcile asks the worker about an uncertain job (nil if it cannot).
	reconcile func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) (jobs.Verdict, error)
	// retryOnTimeout makes a timeout a plain retry instead of uncertain.
	retryOnTimeout bool
	// rules are published in the pool's heartbeat, so raw enqueues of the
	// kind honour them (jobs.Client.EnqueueRaw).
	rules jobs.KindRules
	// shown redacts, in text, the sensitive values of the args payload
	// holds (jobs.RedactText; all of text when payload no longer decodes):
	// nil for a kind without sensitive fields.
	shown func(payload []byte, text string) string
}

// Pool claims due jobs of its queues from the ledger in batches, runs their
// handlers under fenced leases, completes their outcomes in batches, and
// competes to be the namespace's maintenance leader. Create it with
// NewPool, add workers with Register, then call Run.
type Pool struct {
	rdb    redis.UniversalClient
	cfg    Config
	log    *slog.Logger
	ledger *ledger.Ledger
	leases *lease.Manager
	// instance tells this pool's heartbeats from those of another pool
	// with its WorkerID.
	instance string
	margin   time.Duration // the attempts' safety margin (watchdog.Margin of the config's)
	// watchdogs holds every attempt's local deadline on one timer.
	watchdogs watchdog.Group
	metrics   *metrics.Set
	series    series // the per-job metric children, by label values

	mu       sync.Mutex
	handlers map[string]*handler
	periodic []maintenance.Periodic // see AddPeriodic
	running  bool

	started        time.Time
	stopping       context.Context // Run's context: done once the pool stops claiming
	slots          chan struct{}   // one token per busy handler slot
	work           chan *attempt   // claimed attempts, run by Concurrency executor goroutines
	freed          chan struct{}   // signalled when a slot frees
	renewer        *renewer
	completer      *completer
	clock          clockWatch // Redis's clock against the pool's (clock.go)
	evicting       bool       // Redis may evict keys, as last logged (eviction.go; the heartbeat goroutine only)
	evictionUnread bool       // the eviction policy could not be read, as last logged (eviction.go; the heartbeat goroutine only)
	// replicasMissing is the replicas Durability.Replicas requires beyond
	// those connected, as last read (replicas.go).
	replicasMissing atomic.Int64
	clockEvery      time.Duration // how often it is measured (registerEvery)
	parts           partitions    // the queues' partitions (partitions.go)
	unsettled       unsettledSet  // the jobs a stopping pool leaves behind (shutdown.go)
	liveKinds       liveKinds     // the kinds other live pools run (livekinds.go)
	hooks           hooks
}

// NewPool returns a pool over rdb (a single Redis, Sentinel failover client
// or Redis Cluster client). It fails with an error matching ErrConfig on a
// nil rdb or an invalid Config (a Registerer that refuses one of the
// pool's series, one of the same name registered there with other labels
// or help, included).
func NewPool(rdb redis.UniversalClient, cfg Config) (*Pool, error) {
	if argtype.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, configError{err}
	}
	if err := cfg.Jobs.ValidateClient(rdb); err != nil {
		return nil, configError{err}
	}
	p := &Pool{
		rdb: rdb,
		cfg: cfg,
		log: cfg.Logger.With("worker", cfg.WorkerID),
		leases: lease.NewManager(rdb, lease.Config{Namespace: cfg.Jobs.Namespace, SafetyMargin: cfg.SafetyMargin,
			Sentinel: cfg.Jobs.Sentinel, Durability: lease.Durability(cfg.Jobs.Durability), Logger: cfg.Logger.With("worker", cfg.WorkerID)}),
		margin:   watchdog.Margin(cfg.LeaseTTL, cfg.SafetyMargin),
		metrics:  metrics.New(cfg.Registerer),
		handlers: map[string]*handler{},
		slots:    make(chan struct{}, cfg.Concurrency),
		work:     make(chan *attempt, cfg.Concurrency),
		freed:    make(chan struct{}, 1),
		stopping: context.Background(), // Run's, once it runs

		clockEvery: registerEvery,
		instance:   uuid.NewString(),
	}
	// Every claim and completion checks the ledger for a rewind (a Redis
	// that came back with older data): logged, recorded and counted.
	p.ledger = ledger.New(rdb, ledger.Config{Namespace: cfg.Jobs.Namespace, Retention: cfg.Jobs.Retention,
		Sentinel: cfg.Jobs.Sentinel, Logger: p.log, Name: cfg.WorkerID, Durability: durable.Options(cfg.Jobs.Durability),
		OnRewind: func(r ledger.Rewind) { p.metrics.CountRewind(ledger.Logical(r.Queue), p.ledger.LossID(r)) }})
	if err := p.metrics.Err(); err != nil {
		return nil, configError{fmt.Errorf("Config.Registerer: %w", err)}
	}
	p.renewer = newRenewer(p)
	p.completer = newCompleter(p)
	return p, nil
}

// ID returns the pool's worker id ("" for a nil pool).
func (p *Pool) ID() string {
	if p == nil {
		return ""
	}
	return p.cfg.WorkerID
}

// Register adds the worker for T's kind to p. It fails with ErrNilWorker
// for a nil worker, ErrRegistered for a kind already registered,
// ErrRunning once the pool runs and ErrConfig for a nil pool or a
// middleware (Config.Middleware) that returns a nil Handler. An args type
// T whose Kind method, called on T's zero value, panics or gives an invalid
// kind (jobs.ValidateKind), or that cannot encode as a JSON object (a func,
// a channel, an int, a slice; a struct with a func or channel field), is
// refused with an error matching ErrConfig and jobs.ErrInvalid.
func Register[T jobs.JobArgs](p *Pool, w jobs.Worker[T]) error {
	if p.unmade() {
		return errNilPool
	}
	zero := argtype.Zero[T]() // T may be a pointer to the args
	kind, err := argtype.ZeroKind[T]()
	if err == nil {
		err = jobs.ValidateKind(kind)
	}
	if err != nil {
		return &argsTypeError{what: fmt.Sprintf("%T.Kind()", zero), err: err}
	}
	if err := argtype.CheckObject(reflect.TypeFor[T]()); err != nil {
		return &argsTypeError{what: "kind " + kind + ": args type", err: err}
	}
	if argtype.IsNil(w) {
		return fmt.Errorf("%w for kind %s: build the worker before Register (a jobs.WorkFunc, or a non-nil pointer to a type with a Work method)", ErrNilWorker, kind)
	}
	h := &handler{
		kind:  kind,
		rules: jobs.RulesOf(zero),
	}
	// Texts user code builds for a kind with sensitive fields (errors,
	// panic values) have those fields' values replaced before anything
	// stores, logs or traces them: middleware sees them so.
	sensitive := h.rules.Sensitive
	run := func(ctx context.Context, _ *attempt, base jobs.Job[jobs.JobArgs], payload []byte) (err error) {
		job, err := decode[T](base, payload, sensitive)
		if err != nil {
			return err
		}
		if sensitive {
			defer rules.Redact(job.Args, &err)
		}
		return w.Work(ctx, job)
	}
	if r, ok := w.(jobs.Reconciler[T]); ok {
		h.reconcile = func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) (_ jobs.Verdict, err error) {
			job, err := decode[T](base, payload, sensitive)
			if err != nil {
				return jobs.CannotTell, err
			}
			if sensitive {
				defer rules.Redact(job.Args, &err)
			}
			return r.Reconcile(ctx, job)
		}
	}
	if sensitive {
		h.shown = func(payload []byte, text string) string {
			var args T
			if jobs.DecodeArgs(payload, &args) != nil {
				return jobs.Redacted
			}
			return jobs.RedactText(args, text)
		}
	}
	if r, ok := w.(jobs.RetryOnTimeout); ok {
		h.retryOnTimeout = r.RetryOnTimeout()
	}
	wrapped, err := p.wrap(h, run)
	if err != nil {
		return err
	}
	h.run = wrapped
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return ErrRunning
	}
	if _, dup := p.handlers[kind]; dup {
		return fmt.Errorf("%w: %s", ErrRegistered, kind)
	}
	p.handlers[kind] = h
	return nil
}

// argsTypeError is Register's refusal of an args type: its Kind method
// panics on the zero value or gives an invalid kind, or its values cannot
// encode as a JSON object. It matches ErrConfig and jobs.ErrInvalid; what
// says which of the type's properties err is about.
type argsTypeError struct {
	what string
	err  error
}

func (e *argsTypeError) Error() string {
	return fmt.Sprintf("worker: %s: %v", e.what, e.err)
}

func (e *argsTypeError) Unwrap() []error { return []error{ErrConfig, jobs.ErrInvalid} }

// decode decodes payload into the kind's args and validates them; a
// Validate error's text, and a panic's value, have the args' sensitive
// values replaced when the kind has sensitive fields.
func decode[T jobs.JobArgs](base jobs.Job[jobs.JobArgs], payload []byte, sensitive bool) (*jobs.Job[T], error) {
	var args T
	if err := jobs.DecodeArgs(payload, &args); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, base.Kind, err)
	}
	if !argtype.StartsObject(payload) { // valid JSON, as Unmarshal succeeded
		return nil, fmt.Errorf("%w: %s: args are not a JSON object", errMalformed, base.Kind)
	}
	if err := rules.Validate(args, sensitive); err != nil {
		return nil, fmt.Errorf("%w: %s: invalid args: %s", errMalformed, base.Kind, err.Error())
	}
	return &jobs.Job[T]{
		ID: base.ID, Kind: base.Kind, Queue: base.Queue, OperationID: base.OperationID,
		Attempt: base.Attempt, MaxRetries: base.MaxRetries, Resource: base.Resource,
		Token: base.Token, Owner: base.Owner, Deadline: base.Deadline, Args: args,
		// The handler's own copy: what it (or a goroutine it left running)
		// writes there races with no middleware reading the job's (nil stays
		// nil: no cost for a job without headers).
		Headers: maps.Clone(base.Headers),
	}, nil
}

// shown returns text, which may quote what the attempt's args methods
// built from its args (its resource), with the job's sensitive values
// redacted as in its errors; the pool logs such texts only so. It decodes
// the payload again: for the lines that quote them, never per job.
func (p *Pool) shown(a *attempt, text string) string {
	if h := p.handlerFor(a.job.Kind); h != nil && h.shown != nil {
		return h.shown(a.job.Payload, text)
	}
	return text
}

// shownErr is err with its text shown (Pool.shown); errors.Is and
// errors.As see it as err.
func (p *Pool) shownErr(a *attempt, err error) error {
	if text := p.shown(a, err.Error()); text != err.Error() {
		return &shownError{text: text, err: err}
	}
	return err
}

// shownError is an error whose text had sensitive values replaced.
type shownError struct {
	text string
	err  error
}

func (e *shownError) Error() string { return e.text }
func (e *shownError) Unwrap() error { return e.err }

func (p *Pool) handlerFor(kind string) *handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handlers[kind]
}

// kindLabel is the kind as a metric label: registered kinds only, so
// deliveries of unknown kinds cannot grow the label set.
func (p *Pool) kindLabel(kind string) string {
	if p.handlerFor(kind) == nil {
		return "unknown"
	}
	return kind
}

// reconcileFor returns the kind's Reconcile, if it has one.
func (p *Pool) reconcileFor(kind string) maintenance.ReconcileFunc {
	h := p.handlerFor(kind)
	if h == nil || h.reconcile == nil {
		return nil
	}
	return func(ctx context.Context, rec *jobs.Record) (jobs.Verdict, error) {
		base := jobs.Job[jobs.JobArgs]{
			ID: rec.ID, Kind: rec.Kind, Queue: rec.Queue, OperationID: rec.OperationID, Attempt: rec.Attempts,
			MaxRetries: rec.MaxRetries, Resource: rec.LeaseResource(), Token: rec.Token, Owner: rec.Owner,
			Headers: rec.Headers, // decode gives Reconcile its own copy, as it gives Work
		}
		if rec.Fence > 0 {
			base.Token = rec.Fence
		}
		return h.reconcile(ctx, base, rec.Payload)
	}
}

func (p *Pool) queueNames() []string {
	qs := make([]string, 0, len(p.cfg.Queues))
	for q := range p.cfg.Queues {
		qs = append(qs, q)
	}
	return qs
}

// startFailed is Run's answer to err from its start: nil when ctx ended
// (a pool stopped while it started: it has run, as one stopped later
// has), else the error. Nothing ran yet, so after an error the pool may
// be run again (Redis was not up yet, say). holding names what the failed
// step read or wrote ("" when nothing in particular): on Redis Cluster,
// the master that could not be reached is the one holding it.
func (p *Pool) startFailed(ctx context.Context, holding string, err error) error {
	if ctx.Err() != nil {
		p.log.Info("pool stopped while starting")
		return nil
	}
	p.mu.Lock()
	p.running = false
	p.mu.Unlock()
	var ne net.Error
	if errors.As(err, &ne) {
		_, cluster := p.rdb.(*redis.ClusterClient)
		return &unreachableError{addr: p.redisAddr(ne), cause: ne, err: err, holding: holding, cluster: cluster, connected: !ledger.NotSent(err)}
	}
	if redis.IsAuthError(err) || redis.IsPermissionError(err) {
		return &refusedError{addr: p.redisAddr(nil), err: err}
	}
	return fmt.Errorf("worker: %w", err)
}

// refusedError is Run's error when the pool's Redis refused the client's
// credentials or their permissions as the pool started: it names the
// address and where the credentials are set, and matches ErrRedisUnusable
// and the server's reply.
type refusedError struct {
	addr string // "" when unknown
	err  error
}

func (e *refusedError) Error() string {
	at := ""
	if e.addr != "" {
		at = " at " + e.addr
	}
	if redis.IsPermissionError(e.err) {
		return fmt.Sprintf("worker: Redis%s refused a command or key to the pool's user "+
			"(grant that ACL user the namespace's keys and the commands of the pool's scripts, or give NewPool a client of another user): %v",
			at, redisReply(e.err))
	}
	return fmt.Sprintf("worker: Redis%s refused the pool's credentials "+
		"(set Username and Password in the redis.Options of the client given to NewPool): %v", at, redisReply(e.err))
}

func (e *refusedError) Unwrap() []error { return []error{ErrRedisUnusable, e.err} }

// oldRedisError is Run's error when the pool's Redis is older than the
// ledger needs: it names the address, the server's version and the one
// needed, and matches ErrRedisUnusable and ledger.ErrRedisTooOld.
type oldRedisError struct {
	addr string // "" when unknown
	err  error  // matches ledger.ErrRedisTooOld
}

func (e *oldRedisError) Error() string {
	at := ""
	if e.addr != "" {
		at = " at " + e.addr
	}
	return fmt.Sprintf("worker: Redis%s: %v", at, strings.TrimPrefix(e.err.Error(), "jobs: "))
}

func (e *oldRedisError) Unwrap() []error { return []error{ErrRedisUnusable, e.err} }

// redisReply returns the Redis server's error reply within err (err itself
// when it holds none).
func redisReply(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return re
	}
	return err
}

// unreachableError is Run's error when the network fails the pool's start:
// its text says in plain words that Redis cannot be reached (no connection
// could be made) or, a connection made, that it did not answer in time or
// broke the connection, naming the address and the network's error; it
// unwraps to the whole chain, for errors.Is and errors.As.
type unreachableError struct {
	addr      string // "" when unknown
	cause     net.Error
	err       error
	holding   string // what the start step needed, named on Redis Cluster ("" when nothing in particular)
	cluster   bool   // the client is a Redis Cluster client
	connected bool   // a connection was made: Redis was reached, and failed to answer on it
}

func (e *unreachableError) Error() string {
	at := ""
	if e.addr != "" {
		at = " at " + e.addr
	}
	if e.connected {
		what := "broke the connection"
		if e.cause.Timeout() {
			what = "did not answer in time"
		}
		if e.cluster && e.holding != "" {
			return fmt.Sprintf("worker: the Redis Cluster master%s holding %s, which a pool needs to start, %s: %v", at, e.holding, what, e.cause)
		}
		return fmt.Sprintf("worker: Redis%s %s as the pool started: %v", at, what, e.cause)
	}
	if e.cluster && e.holding != "" {
		// The other masters may be up: the pool needs this one.
		return fmt.Sprintf("worker: cannot reach the Redis Cluster master%s holding %s, which a pool needs to start; "+
			"it starts once that master, or a replica promoted in its place, serves it: %v", at, e.holding, e.cause)
	}
	return fmt.Sprintf("worker: cannot reach Redis%s (is it running, and is the address right?): %v", at, e.cause)
}

func (e *unreachableError) Unwrap() error { return e.err }

// redisAddr names the Redis a network error ne was about: the address it
// dialled, else (and for a nil ne) the client's configured addresses.
func (p *Pool) redisAddr(ne net.Error) string {
	if op := (*net.OpError)(nil); ne != nil && errors.As(ne, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	if s := p.cfg.Jobs.Sentinel; s != nil {
		return fmt.Sprintf("master %s through the Sentinels %s", s.MasterName, strings.Join(s.SentinelAddrs, ","))
	}
	switch c := p.rdb.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}

// Run processes jobs until ctx ends, then shuts down gracefully: it stops
// claiming, puts back the jobs it claimed whose handlers have not started
// (due now, their attempts not consumed), waits up to ShutdownTimeout for
// running handlers, cancels the contexts of those still running (their
// jobs end uncertain; a job whose middleware, still waiting before next,
// then returns an error is put back), completes every outcome it has, and returns nil.
// Handlers that ignore their cancelled context for a few seconds more are
// abandoned: each attempt is recorded uncertain under its own token
// (counted in fencedq_handlers_abandoned_total), and a result such a
// handler returns later is committed only if its token still runs the
// job. When jobs were left unsettled that way, or their outcome's commit
// (or the put-back of a job claimed as the pool stopped) failed, Run
// returns a *ShutdownError naming them (matching
// ErrUnsettled). Run returns within ShutdownTimeout plus ShutdownGrace (10s) of ctx's end
// even when Redis does not answer its last calls (a call already waiting
// for a frozen Redis when ctx ends lasts up to the Redis client's
// ReadTimeout, 5s by default, within that bound). A ctx that ends while the pool starts (before any job is
// claimed) makes it return nil as well, and the pool has run (ErrRunning). A heartbeat of its WorkerID from
// another pool makes it wait until that heartbeat lapses (a crashed pool)
// or fail, when it is refreshed meanwhile (a live pool), with an error
// matching ErrDuplicateWorkerID naming that pool's host. An error from its start is
// returned at once, and Run may be called again; a Redis it cannot reach
// reads "worker: cannot reach Redis at <addr> ...: <network error>", the
// network error kept for errors.Is and errors.As; one that refuses the
// client's credentials or an ACL user's commands, an error matching
// ErrRedisUnusable naming the address. A nil
// pool returns ErrConfig.
func (p *Pool) Run(ctx context.Context) error {
	if p.unmade() {
		return errNilPool
	}
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return ErrRunning
	}
	p.running = true
	p.started = time.Now()
	p.stopping = ctx
	p.mu.Unlock()

	// A master name the Sentinels do not monitor fails every claim (and
	// every command of a failover client given the same options, with
	// go-redis's "all sentinels ... unreachable: redis: nil") until the
	// configuration changes: refuse it first, naming it. Sentinels that do
	// not answer are an outage: claims retry (and log). An address that
	// answers as a Redis server, not a Sentinel, is a configuration error
	// too (each claim's epoch lookup would skip it or fail).
	if err := p.ledger.CheckSentinels(ctx); errors.Is(err, epoch.ErrUnknownMaster) || errors.Is(err, epoch.ErrNotSentinel) {
		return p.startFailed(ctx, "", configError{fmt.Errorf("Config.Jobs.Sentinel: %w", err)})
	}
	// A server older than the ledger needs would start the pool and fail
	// its maintenance reads for ever ("ERR syntax error"): say so now.
	if err := p.ledger.CheckVersion(ctx); err != nil {
		if errors.Is(err, ledger.ErrRedisTooOld) {
			err = &oldRedisError{addr: p.redisAddr(nil), err: err}
		}
		return p.startFailed(ctx, "", err)
	}
	p.checkReplicas(ctx, true)
	if err := p.refreshPartitions(ctx); err != nil {
		return p.startFailed(ctx, "the namespace's partition registry", err)
	}
	if err := p.ledger.RegisterQueues(ctx, p.parts.current()...); err != nil {
		return p.startFailed(ctx, "the namespace's queue registry", err)
	}
	// The hot paths do not check the queue-level keys' types per call
	// (cost): a key of another type is named here, once. The pool still
	// starts: a failing queue does not stop the others (its calls fail and
	// back off on their own).
	if err := p.ledger.CheckQueueKeys(ctx, p.parts.current()...); err != nil {
		p.log.Error("a queue key holds another type than fencedq writes there; that queue's calls fail until it is removed",
			"error", err)
	}
	// The start is on the namespace's clock, like every time pools compare
	// (the newest pool's periodic definition wins), not this machine's.
	started, err := p.ledger.ServerTime(ctx)
	if err != nil {
		return p.startFailed(ctx, "the namespace's clock record "+p.ledger.ClockKey(), err)
	}
	p.mu.Lock()
	p.started = started
	p.mu.Unlock()
	if err := p.join(ctx); err != nil {
		// The join may have published the heartbeat before it failed (its
		// context ended between two calls): a pool that did not start must
		// not look alive, nor make a restart with its WorkerID wait.
		p.unjoin(ctx)
		return p.startFailed(ctx, "the pool's heartbeat", err)
	}
	p.log.Info("pool started", "queues", p.cfg.Queues, "concurrency", p.cfg.Concurrency, "lease_ttl", p.cfg.LeaseTTL)
	if len(p.handlers) == 0 {
		p.log.Warn("no workers registered: every job this pool claims is put back for another pool (register them with worker.Register before Run)")
	}
	for _, s := range p.periodic {
		if p.handlers[s.Spec.Kind] == nil {
			p.log.Warn("a periodic job's kind has no worker in this pool: its ticks run only where a pool registers one",
				"schedule", s.Spec.ID, "kind", s.Spec.Kind, "queue", s.Spec.Queue)
		}
	}

	// Handlers run under work's values, and outlive ctx by ShutdownTimeout.
	// An attempt's context is not a child of a shared cancellable context
	// (whose lock every attempt would take to register and leave): the
	// renewer, which knows every running attempt, cancels them all at the
	// end of ShutdownTimeout (renewer.stopAll).
	work := context.WithoutCancel(ctx)
	// Renewals, completions and releases go on until the handlers are done.
	background, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()

	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); p.renewer.run(background) }()
	go func() { defer bg.Done(); p.completer.run(background) }()

	var maint sync.WaitGroup
	var leader *maintenance.Leader
	if !p.cfg.Maintenance.Disabled {
		leader = p.maintenance()
		maint.Go(func() { leader.Run(ctx) })
	}
	var heartbeat sync.WaitGroup
	heartbeat.Go(func() { p.watchClock(ctx, leader) })

	// Executors are long-lived goroutines (their stacks stay grown), one per slot.
	var handlers sync.WaitGroup
	for range p.cfg.Concurrency {
		handlers.Add(1)
		go p.executor(&handlers)
	}
	// The shutdown's bounds count from the end of ctx, not from the return
	// of a fetch loop held by a call to a frozen Redis.
	stoppedAt := make(chan time.Time, 1)
	stopHook := context.AfterFunc(ctx, func() { stoppedAt <- time.Now() })
	p.produce(ctx, work)
	close(p.work)
	stopped := time.Now()
	if !stopHook() {
		stopped = <-stoppedAt
	}

	p.log.Info("pool shutting down", "timeout", p.cfg.ShutdownTimeout)
	bound := p.cfg.ShutdownTimeout + ShutdownGrace
	if bound < p.cfg.ShutdownTimeout { // a ShutdownTimeout near the largest Duration: no wrap-around into the past
		bound = math.MaxInt64
	}
	giveUp := stopped.Add(bound)
	// The last commits, the leader's release and the heartbeat's end talk
	// to Redis, and the functions registered for abandoned attempts may
	// block: none must hold Run past giveUp.
	var tail sync.WaitGroup
	if !waitTimeout(&handlers, time.Until(stopped.Add(p.cfg.ShutdownTimeout))) {
		p.renewer.stopAll(errShutdown)
		if !waitTimeout(&handlers, commitTimeout) {
			ids, hooks := p.abandon()
			// Named, so an operator can tell which jobs were abandoned
			// (the process may exit before they return).
			p.log.Error("handlers still running after their contexts were cancelled; their attempts are recorded uncertain and the maintenance leader resolves their jobs",
				"job_ids", ids)
			for _, f := range hooks {
				tail.Go(f)
			}
		}
	}
	tail.Go(func() {
		p.completer.close()
		stopBackground()
		bg.Wait() // the completer applies what is left
		maint.Wait()
		heartbeat.Wait()
		// After the last heartbeat, so none lands after it; bounded, and
		// the heartbeat lapses by itself if the leave never lands. Only
		// this instance's heartbeat: a live pool sharing the WorkerID
		// keeps its own.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		if err := p.ledger.LeaveAs(lctx, p.cfg.WorkerID, p.instance); err != nil {
			p.log.Warn("leaving the list of pools failed; this pool's entry lapses by itself", "error", err)
		}
		cancel()
	})
	if !waitTimeout(&tail, time.Until(giveUp)) {
		p.log.Error("Redis did not answer the shutdown's last calls in time; the outcomes not committed are left to lease expiry")
		p.completer.giveUp()
	}
	err = p.unsettled.err()
	if err != nil {
		p.log.Warn("pool stopped with jobs unsettled", "error", err)
	} else {
		p.log.Info("pool stopped")
	}
	return err
}

// join publishes the pool's first heartbeat. A heartbeat of its WorkerID
// from another pool found there is watched: refreshed (its pool is alive)
// the start fails with ErrDuplicateWorkerID; lapsed (a pool that crashed,
// restarted here with its WorkerID) the pool starts. A restart after a
// crash thus waits for the old heartbeat to lapse (at most heartbeatTTL)
// instead of failing; a live pool is told within one heartbeat interval.
func (p *Pool) join(ctx context.Context) error {
	for {
		other, left, err := p.ledger.Join(ctx, p.info(), heartbeatTTL)
		if err != nil || other == nil {
			return err
		}
		left = min(left, heartbeatTTL)
		p.log.Warn("a heartbeat of this pool's WorkerID from another pool is there: waiting for it to lapse (a pool that crashed) or be refreshed (a live one)",
			"other_host", other.Host, "other_pid", other.PID, "lapses_within", left)
		refreshed, err := p.watchHeartbeat(ctx, other, left+time.Second)
		if err != nil {
			return err
		}
		if refreshed {
			p.sharedID(other, true)
			return fmt.Errorf("%w: %q is the WorkerID of a live pool on host %s (pid %d, started %s)",
				ErrDuplicateWorkerID, p.cfg.WorkerID, other.Host, other.PID, other.Started.Format(time.RFC3339))
		}
	}
}

// unjoin removes the heartbeat a join that failed may have published
// (this instance's only), within a second whatever ctx says.
func (p *Pool) unjoin(ctx context.Context) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := p.ledger.LeaveAs(lctx, p.cfg.WorkerID, p.instance); err != nil {
		p.log.Warn("removing the heartbeat of a start that failed failed; it lapses by itself", "error", err)
	}
}

// watchHeartbeat reads the heartbeat of the pool's WorkerID until it
// differs from other's (refreshed: true), is gone, or bound passed (a
// heartbeat nobody refreshes is a dead pool's: false).
func (p *Pool) watchHeartbeat(ctx context.Context, other *jobs.PoolInfo, bound time.Duration) (refreshed bool, err error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(bound)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
		cur, err := p.ledger.HeartbeatOf(ctx, p.cfg.WorkerID)
		if err != nil {
			return false, err
		}
		if cur == nil {
			return false, nil
		}
		if cur.Instance != other.Instance || !cur.LastHeartbeat.Equal(other.LastHeartbeat) {
			return cur.Instance != p.instance, nil
		}
	}
	return false, p.ledger.Heartbeat(ctx, p.info(), heartbeatTTL)
}

// heartbeat publishes the pool's heartbeat and reports another pool's it
// replaced.
func (p *Pool) heartbeat(ctx context.Context) {
	other, err := p.ledger.Beat(ctx, p.info(), heartbeatTTL)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("heartbeat failed", "error", err)
		}
		return
	}
	if other != nil {
		p.sharedID(other, false)
	}
}

// sharedID logs and counts other, a live heartbeat of this pool's
// WorkerID from another pool, found at the start or at a heartbeat.
func (p *Pool) sharedID(other *jobs.PoolInfo, starting bool) {
	p.metrics.WorkerIDConflicts.Inc()
	host, _ := os.Hostname()
	msg := "another live pool has this pool's WorkerID: they overwrite each other's heartbeat and the list of pools shows one of them; give each its own (Config.WorkerID)"
	if starting {
		msg = "not starting: another live pool has this pool's WorkerID; give each its own (Config.WorkerID)"
	}
	p.log.Error(msg, "host", host, "pid", os.Getpid(), "other_host", other.Host, "other_pid", other.PID,
		"other_started", other.Started)
}

// info is the pool's heartbeat.
func (p *Pool) info() jobs.PoolInfo {
	host, _ := os.Hostname()
	clock, jumps := p.clockInfo()
	kinds := make(map[string]jobs.KindRules, len(p.handlers))
	var reconcilers []string
	for k, h := range p.handlers {
		kinds[k] = h.rules
		if h.reconcile != nil {
			reconcilers = append(reconcilers, k)
		}
	}
	slices.Sort(reconcilers)
	var schedules []string
	var digests map[string]string
	if !p.cfg.Maintenance.PeriodicDisabled && !p.cfg.Maintenance.Disabled && len(p.periodic) > 0 {
		digests = make(map[string]string, len(p.periodic))
		for _, s := range p.periodic {
			schedules = append(schedules, s.Spec.ID)
			digests[s.Spec.ID] = s.Spec.Digest
		}
	}
	info := jobs.PoolInfo{
		ID: p.cfg.WorkerID, Instance: p.instance, Host: host, PID: os.Getpid(), Queues: p.cfg.Queues,
		Concurrency: p.cfg.Concurrency, Busy: len(p.slots), Version: jobs.BuildVersion(), Started: p.started,
		Schedules: schedules, ScheduleDigests: digests, Kinds: kinds, Reconcilers: reconcilers, Clock: clock, ClockJumps: jumps,
	}
	if n := p.replicasMissing.Load(); n > 0 {
		info.ReplicasMissing, info.ReplicasRequired = int(n), p.cfg.Jobs.Durability.Replicas
	}
	return info
}

// effectPruner returns the effect log as a pruner when it can prune itself
// and a retention is set.
func effectPruner(mc MaintenanceConfig) maintenance.EffectPruner {
	pr, ok := mc.EffectLog.(maintenance.PrunableLog)
	if !ok || mc.EffectRetention <= 0 {
		return nil
	}
	return func(ctx context.Context) (int64, error) { return pr.PruneEffects(ctx, mc.EffectRetention) }
}

// errShutdown is the cause given to handler contexts cancelled at shutdown.
var errShutdown = errors.New("worker: pool shut down")

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		select {
		case <-done: // both ready (d was not positive)
			return true
		default:
			return false
		}
	}
}

// reconciledRetryDelay is Config.RetryDelay for the retry after attempt n,
// which the resolver found not applied, bounded as retryDelay bounds a
// failed attempt's: a RetryDelay that panics or ends its goroutine
// (runtime.Goexit) is logged and the default delay is used, and the
// maintenance leader goes on.
func (p *Pool) reconciledRetryDelay(log *slog.Logger, n int) time.Duration {
	done := make(chan time.Duration, 1)
	go func() {
		d, called := defaultRetryDelay(n), false
		defer func() {
			if r := recover(); r != nil {
				log.Error("RetryDelay panicked; the retry of an attempt found not applied uses the default delay",
					"panic", ledger.CapError(fmt.Sprint(r)), "retry", n, "delay", d)
			} else if !called {
				log.Error("RetryDelay ended its goroutine (runtime.Goexit); the retry of an attempt found not applied uses the default delay",
					"retry", n, "delay", d)
			}
			done <- d
		}()
		d = min(max(p.cfg.RetryDelay(n), 0), jobs.MaxDelay)
		called = true
	}()
	return <-done
}

// maintenance returns the maintenance leader this pool runs.
func (p *Pool) maintenance() *maintenance.Leader {
	mc := p.cfg.Maintenance
	log := p.log.With("component", "maintenance")
	periodic := p.periodic
	if mc.PeriodicDisabled && len(periodic) > 0 {
		log.Info("periodic jobs disabled: this pool enqueues no tick when it leads", "schedules", len(periodic))
		periodic = nil
	}
	return maintenance.New(maintenance.Config{
		WorkerID:          p.cfg.WorkerID,
		LeaseTTL:          max(p.cfg.LeaseTTL, 2*mc.Interval), // a dead leader is replaced within about its lease
		Interval:          mc.Interval,
		MaxReconcileTries: mc.MaxReconcileTries,
		ReconcileTimeout:  p.cfg.HandlerTimeout,
		PruneInterval:     mc.PruneInterval,
		UncommittedGrace:  mc.UncommittedGrace,
		EffectLog:         mc.EffectLog,
		EffectPruner:      effectPruner(mc),
		Reconcile:         p.reconcileFor,
		RetryDelay:        func(n int) time.Duration { return p.reconciledRetryDelay(log, n) },
		Logger:            log,
		Metrics:           p.metrics,
		Registerer:        p.cfg.Registerer,
		Periodic:          periodic,
		Started:           p.started,
		ParseSchedule:     recordedSchedule,
		Outboxes:          outboxes(mc.Outboxes),
		Decided:           &p.hooks.decided,
		EnqueueMiddleware: p.cfg.Jobs.EnqueueMiddleware,
	}, p.ledger, p.leases)
}
