package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// ErrRegistered means a worker for the kind is already registered.
var ErrRegistered = errors.New("worker: kind already registered")

// ErrRunning means the pool is already running (or ran): register workers
// before Run, and run a pool once.
var ErrRunning = errors.New("worker: pool already running")

// errDeferred is returned to asynq when the job's resource is held by
// another job: not a failure, redelivered shortly.
var errDeferred = errors.New("worker: resource busy, delivery deferred")

// errMalformed marks a payload that does not decode into the kind's args.
var errMalformed = errors.New("worker: malformed payload")

// handler is a registered kind with its types erased.
type handler struct {
	kind string
	// run decodes payload into the kind's args and calls the worker.
	run func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) error
	// reconcile asks the worker about an uncertain job (nil if it cannot).
	reconcile func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) (jobs.Verdict, error)
	// retryOnTimeout makes a timeout a plain retry instead of uncertain.
	retryOnTimeout bool
}

// Pool runs job handlers for registered kinds on asynq deliveries, with a
// fenced claim, lease keep-alive and token-checked commit around each, and
// runs the reconciler. Create it with NewPool, add workers with Register,
// then call Run.
type Pool struct {
	rdb     redis.UniversalClient
	cfg     Config
	log     *slog.Logger
	ledger  *jobs.Ledger
	leases  *lease.Manager
	client  *jobs.Client
	metrics *metrics.Set

	mu       sync.Mutex
	handlers map[string]*handler
	running  bool
}

// NewPool returns a pool over rdb (a single Redis, Sentinel failover client
// or Redis Cluster client).
func NewPool(rdb redis.UniversalClient, cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	jc := jobs.Config{Namespace: cfg.Namespace, Retention: cfg.Retention, Registerer: cfg.Registerer}
	return &Pool{
		rdb:      rdb,
		cfg:      cfg,
		log:      cfg.Logger.With("worker", cfg.WorkerID),
		ledger:   jobs.NewLedger(rdb, jc),
		leases:   lease.NewManager(rdb, lease.Config{Namespace: cfg.Namespace}),
		client:   jobs.NewClient(rdb, jc),
		metrics:  metrics.New(cfg.Registerer),
		handlers: map[string]*handler{},
	}, nil
}

// Ledger returns the pool's ledger.
func (p *Pool) Ledger() *jobs.Ledger { return p.ledger }

// ID returns the pool's worker id.
func (p *Pool) ID() string { return p.cfg.WorkerID }

// Register adds the worker for T's kind to p. It fails with ErrRegistered
// for a kind already registered and ErrRunning once the pool runs.
func Register[T jobs.JobArgs](p *Pool, w jobs.Worker[T]) error {
	var zero T
	kind := zero.Kind()
	if kind == "" {
		return fmt.Errorf("worker: %T.Kind() returned an empty kind", zero)
	}
	h := &handler{
		kind: kind,
		run: func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) error {
			job, err := decode[T](base, payload)
			if err != nil {
				return err
			}
			return w.Work(ctx, job)
		},
	}
	if r, ok := w.(jobs.Reconciler[T]); ok {
		h.reconcile = func(ctx context.Context, base jobs.Job[jobs.JobArgs], payload []byte) (jobs.Verdict, error) {
			job, err := decode[T](base, payload)
			if err != nil {
				return jobs.CannotTell, err
			}
			return r.Reconcile(ctx, job)
		}
	}
	if r, ok := w.(jobs.RetryOnTimeout); ok {
		h.retryOnTimeout = r.RetryOnTimeout()
	}
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

func decode[T jobs.JobArgs](base jobs.Job[jobs.JobArgs], payload []byte) (*jobs.Job[T], error) {
	var args T
	if err := json.Unmarshal(payload, &args); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, base.Kind, err)
	}
	if v, ok := any(args).(jobs.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: invalid args: %v", errMalformed, base.Kind, err)
		}
	}
	return &jobs.Job[T]{
		ID: base.ID, Kind: base.Kind, Queue: base.Queue, OperationID: base.OperationID,
		Attempt: base.Attempt, MaxRetries: base.MaxRetries, Resource: base.Resource,
		Token: base.Token, Owner: base.Owner, Deadline: base.Deadline, Args: args,
	}, nil
}

func (p *Pool) handlerFor(kind string) *handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handlers[kind]
}

// Run processes jobs until ctx ends, then shuts down gracefully: it stops
// taking deliveries and waits up to ShutdownTimeout for running handlers.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return ErrRunning
	}
	p.running = true
	p.mu.Unlock()

	queues := map[string]int{}
	for q, prio := range p.cfg.Queues {
		queues[p.ledger.AsynqQueue(q)] = prio
		if err := p.rdb.SAdd(ctx, p.ledger.QueuesKey(), q).Err(); err != nil {
			return fmt.Errorf("worker: register queue %s: %w", q, err)
		}
	}
	srv := asynq.NewServerFromRedisClient(p.rdb, asynq.Config{
		Concurrency:     p.cfg.Concurrency,
		Queues:          queues,
		StrictPriority:  p.cfg.StrictPriority,
		ShutdownTimeout: p.cfg.ShutdownTimeout,
		IsFailure:       func(err error) bool { return !errors.Is(err, errDeferred) },
		RetryDelayFunc: func(n int, err error, _ *asynq.Task) time.Duration {
			if errors.Is(err, errDeferred) {
				return 100*time.Millisecond + rand.N(400*time.Millisecond)
			}
			return p.cfg.RetryDelay(n)
		},
		TaskCheckInterval:        100 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		Logger:                   asynqLogger{p.log},
		LogLevel:                 asynq.WarnLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(p.process)); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	p.log.Info("pool started", "queues", p.cfg.Queues, "concurrency", p.cfg.Concurrency, "lease_ttl", p.cfg.LeaseTTL)
	var wg sync.WaitGroup
	if !p.cfg.Reconciler.Disabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.newReconciler().run(ctx)
		}()
	}
	<-ctx.Done()
	p.log.Info("pool shutting down", "timeout", p.cfg.ShutdownTimeout)
	srv.Shutdown()
	wg.Wait()
	_ = p.client.Close()
	p.log.Info("pool stopped")
	return nil
}

// queueOf strips the namespace from an asynq queue name.
func (p *Pool) queueOf(asynqQueue string) string {
	return strings.TrimPrefix(asynqQueue, p.cfg.Namespace+"/")
}

// asynqLogger sends asynq's own logs to the pool's slog logger.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "source", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "source", "asynq", "fatal", true)
}
