// Package maintenance is the reconciler: a leader elected among a
// namespace's pools with a fenced lease runs small services, each on its own
// interval and each fenced by the leader's token in every ledger write:
//
//   - the expirer moves running jobs whose lease deadline passed to uncertain;
//   - the resolver asks what happened to uncertain jobs (the kind's
//     Reconcile, else the effect log) and decides: succeeded, re-run, or
//     review after MaxTries answers of "cannot tell";
//   - the pruner drops index entries of finished jobs past retention;
//   - the status service publishes the job counts and the leader's status;
//   - the periodic service enqueues the ticks of the pool's schedules, each
//     with its own operation id (periodic.go);
//   - one relay service per outbox moves committed jobs into the queue, on
//     each notification and every Interval (outbox.go).
//
// No service can be stopped by one bad record, one panicking Reconcile, or
// a Redis that lost its keys: each pass handles errors per job and per
// queue, and a lost leadership is simply sought again.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// PrunableLog is an effect log that can delete its old records
// (pgfence.Store).
type PrunableLog interface {
	PruneEffects(ctx context.Context, olderThan time.Duration) (int64, error)
}

// EffectPruner deletes effect records past their retention and says how many.
type EffectPruner func(ctx context.Context) (int64, error)

// ReconcileFunc asks a job kind whether an uncertain job's effect happened.
type ReconcileFunc = attempt.ReconcileFunc

// Defaults for the services' batch sizes.
const (
	// ExpireBatch bounds how many expired attempts one pass moves per queue.
	ExpireBatch = 500
	// ResolveBatch bounds how many uncertain jobs one pass looks at per queue.
	ResolveBatch = 50
)

// Config configures the services. Every field is required except
// EffectLog.
type Config struct {
	WorkerID      string
	LeaseTTL      time.Duration // the leader lease's TTL
	Interval      time.Duration // expirer, resolver and status interval
	MaxTries      int           // "cannot tell" answers before review
	PruneInterval time.Duration
	Timeout       time.Duration // bound on one Reconcile call
	EffectLog     fence.EffectLog
	// EffectPruner, when set, deletes old effect records on every prune pass.
	EffectPruner EffectPruner
	// Reconciler returns the kind's Reconcile, or nil.
	Reconciler func(kind string) ReconcileFunc
	Logger     *slog.Logger
	Metrics    *metrics.Set
	// Periodic are the schedules the periodic service enqueues, every
	// PeriodicInterval (none: the service does not run).
	Periodic         []Periodic
	PeriodicInterval time.Duration
	// Relays are the outboxes the relay service moves into the queue (see
	// outbox.go).
	Relays []Relay
	// Decided, when a test initialised it, gets each decision of the
	// expirer and the resolver once it is counted and logged.
	Decided *testsignal.Signal[Decision]
}

// Decision is what Config.Decided carries: a job and the decision's
// metric result (expired, applied, not_applied, cannot_tell, review).
type Decision struct {
	JobID  string
	Result string
}

// Services is the elector and the services it runs while leading.
type Services struct {
	cfg      Config
	ledger   *ledger.Ledger
	leases   *lease.Manager
	log      *slog.Logger
	expired  atomic.Int64
	resolved atomic.Int64
	// seriesMinute is the minute (unix ms) the status service last recorded
	// the queues' history for (see status.go).
	seriesMinute atomic.Int64
	// client enqueues periodic ticks and relayed outbox rows.
	client     *jobs.Client
	expireWake chan struct{} // the expirer's own wake-up at the earliest deadline
}

// New returns the services of one pool.
func New(cfg Config, ledger *ledger.Ledger, leases *lease.Manager) *Services {
	if cfg.PeriodicInterval <= 0 {
		cfg.PeriodicInterval = cfg.Interval
	}
	client := jobs.NewClient(ledger.Redis(), jobs.Config{Namespace: ledger.Namespace(), Retention: ledger.Retention()})
	return &Services{cfg: cfg, ledger: ledger, leases: leases, log: cfg.Logger, client: client,
		expireWake: make(chan struct{}, 1)}
}

// service is one periodic task run while leading; leader is the token
// every ledger write carries.
type service struct {
	name     string
	interval time.Duration
	pass     func(ctx context.Context, leader lease.Token) error
	// wake, when set, is called once per leadership; each receive on its
	// channel runs a pass before the interval is up.
	wake func(ctx context.Context) <-chan struct{}
}

func (s *Services) services() []service {
	svcs := []service{
		{"expirer", s.cfg.Interval, s.expire, func(context.Context) <-chan struct{} { return s.expireWake }},
		{"resolver", s.cfg.Interval, s.resolve, nil},
		{"status", s.cfg.Interval, s.status, nil},
		{"pruner", s.cfg.PruneInterval, s.prune, nil},
	}
	if len(s.cfg.Periodic) > 0 {
		svcs = append(svcs, service{"periodic", s.cfg.PeriodicInterval, s.periodic, nil})
	}
	return append(svcs, s.relayServices()...)
}

// Run competes for leadership until ctx ends and, while leading, runs every
// service on its own interval under the leader lease's context.
func (s *Services) Run(ctx context.Context) {
	defer s.cfg.Metrics.Leader.Set(0)
	for {
		wait := s.lead(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// lead tries to become the leader and, if it does, runs the services until
// the leadership or ctx ends. It returns how long to wait before trying
// again: until the current leader's lease ends (a dead leader is replaced
// as soon as its lease lapses), at most Interval.
func (s *Services) lead(ctx context.Context) time.Duration {
	l, err := s.leases.Acquire(ctx, ledger.LeaderResource, s.cfg.WorkerID, s.cfg.LeaseTTL)
	if err != nil {
		var held *lease.HeldError
		if errors.As(err, &held) {
			return min(max(time.Until(held.Deadline), 10*time.Millisecond), s.cfg.Interval)
		}
		if ctx.Err() == nil {
			s.log.Warn("reconciler leader election failed", "error", err)
		}
		return s.cfg.Interval
	}
	session, err := s.leases.KeepAlive(ctx, l, s.cfg.LeaseTTL)
	if err != nil {
		s.log.Warn("reconciler leadership could not be kept", "error", err)
		return s.cfg.Interval
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = session.Release(rctx)
		cancel()
	}()
	s.cfg.Metrics.Leader.Set(1)
	defer func() {
		s.cfg.Metrics.Leader.Set(0)
		// Only the leader exports job counts: a former leader's would go stale.
		s.cfg.Metrics.Jobs.Reset()
	}()
	s.log.Info("reconciler is the leader", "token", l.Token.String())
	lctx := session.Context()
	var wg sync.WaitGroup
	for _, svc := range s.services() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(lctx, svc, l.Token)
		}()
	}
	wg.Wait()
	if ctx.Err() == nil {
		s.log.Warn("reconciler leadership lost", "cause", context.Cause(lctx))
	}
	return s.cfg.Interval
}

// loop runs one service until ctx ends. A pass that panics or fails is
// logged and counted; the next pass runs on schedule.
func (s *Services) loop(ctx context.Context, svc service, leader lease.Token) {
	t := time.NewTicker(svc.interval)
	defer t.Stop()
	var wake <-chan struct{}
	if svc.wake != nil {
		wake = svc.wake(ctx)
	}
	for {
		if err := s.safePass(ctx, svc, leader); err != nil && ctx.Err() == nil {
			s.cfg.Metrics.ReconcileErrors.Inc()
			s.log.Warn("reconciler pass failed", "service", svc.name, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

func (s *Services) safePass(ctx context.Context, svc service, leader lease.Token) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return svc.pass(ctx, leader)
}

// eachQueue runs f on every known queue. An error on one queue is logged
// and the others go on; a stale leader token ends the pass.
func (s *Services) eachQueue(ctx context.Context, service string, f func(q string) error) error {
	qs, err := s.ledger.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if err := f(q); err != nil {
			if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
				return err
			}
			s.cfg.Metrics.ReconcileErrors.Inc()
			s.log.Warn("reconciler pass failed on one queue", "service", service, "queue", q, "error", err)
		}
	}
	return nil
}
