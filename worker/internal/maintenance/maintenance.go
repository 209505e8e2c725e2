// Package maintenance is the maintenance leader: one pool of a namespace
// at a time, elected with a fenced lease (elector.go), runs small services,
// each its own type with its own interval, each fenced by the leader's
// token in every ledger write, and each testable one pass at a time
// (runOnce):
//
//   - the expirer moves running jobs whose lease deadline passed to
//     uncertain (expirer.go);
//   - the resolver reconciles uncertain jobs: it asks what happened (the
//     kind's Reconcile, else the effect log) and decides: succeeded, re-run,
//     or review after MaxReconcileTries answers of "cannot tell"
//     (resolver.go);
//   - the pruner drops index entries of finished jobs past retention, and
//     old effect records (pruner.go);
//   - the status service publishes the job counts, the queues' history and
//     the leader's status (status.go);
//   - the periodic service enqueues the ticks of the pool's schedules, each
//     with its own operation id (periodic.go);
//   - one relay service per outbox moves committed jobs into the queue, on
//     each notification and every Interval (outbox.go);
//   - the hand-over service delivers the workflow hand-over records a
//     completer did not move (handover.go).
//
// "Reconcile" names only what the resolver does: deciding uncertain jobs.
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
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// Config configures the leader and its services. Every field is required
// except EffectLog, EffectPruner, Registerer, Periodic, Outboxes,
// RetryDelay and Decided.
type Config struct {
	// WorkerID names the pool in the leader lease, the published status
	// and the resolver's decisions.
	WorkerID string
	// LeaseTTL is the leader lease's TTL.
	LeaseTTL time.Duration
	// Interval is the expirer's, the resolver's, the status service's, the
	// periodic service's and the relays' interval, and the longest the
	// elector waits between two tries.
	Interval time.Duration
	// MaxReconcileTries is how many "cannot tell" answers send a job to
	// review.
	MaxReconcileTries int
	// ReconcileTimeout bounds one Reconcile call.
	ReconcileTimeout time.Duration
	// PruneInterval is the pruner's interval.
	PruneInterval time.Duration
	// UncommittedGrace is how long a workflow's steps written in other
	// queues wait for its home commit before the hand-over service
	// abandons it (ledger.AbandonUncommitted).
	UncommittedGrace time.Duration
	// EffectLog answers the resolver for kinds without a Reconcile.
	EffectLog fence.EffectLog
	// EffectPruner, when set, deletes old effect records on every prune pass.
	EffectPruner EffectPruner
	// Reconcile returns the kind's Reconcile, or nil.
	Reconcile func(kind string) ReconcileFunc
	// RetryDelay gives the delay before retry n of a job whose attempt n
	// the resolver found not applied (the pool's, as after a failed
	// attempt; nil: none).
	RetryDelay func(n int) time.Duration
	// Logger gets the leader's logs; each service adds its "service" field.
	Logger *slog.Logger
	// Metrics are the pool's series.
	Metrics *metrics.Set
	// Registerer is the pool's registry (nil: none), where the leader's
	// own client counts the rewinds it detects and the enqueues it
	// re-submits.
	Registerer prometheus.Registerer
	// Periodic are the schedules the periodic service enqueues (none: the
	// service does not run).
	Periodic []Periodic
	// Started is when the pool started: of two definitions of one
	// schedule id, the most recently started pool's is recorded.
	Started time.Time
	// ParseSchedule builds the ticks of a schedule expression in a zone,
	// as recorded by another pool (nil: a schedule recorded otherwise is
	// skipped).
	ParseSchedule func(expr, zone string) (func(time.Time) time.Time, error)
	// Outboxes are the outboxes the relay services move into the queue,
	// one service each (see outbox.go).
	Outboxes []Outbox
	// Decided, when a test initialised it, gets each decision of the
	// expirer and the resolver once it is counted and logged.
	Decided *testsignal.Signal[Decision]
	// EnqueueMiddleware wraps the enqueues of periodic ticks and relayed
	// outbox rows (the pool's jobs.Config.EnqueueMiddleware).
	EnqueueMiddleware []jobs.EnqueueMiddleware
}

// ResultExpired is the Decision result of an attempt the expirer moved to
// uncertain.
const ResultExpired = "expired"

// Decision is what Config.Decided carries: a job and what was decided:
// ResultExpired from the expirer; from the resolver, the verdict's name
// (applied, not_applied, cannot_tell) or metrics.ResultReview.
type Decision struct {
	JobID  string
	Result string
}

// Leader is the elector and the services it runs while this pool leads.
type Leader struct {
	client   *jobs.Client // enqueues ticks and relayed rows; records them for re-submission
	elector  *elector
	metrics  *metrics.Set
	expirer  *expirer
	resolver *resolver
	pruner   *pruner
	status   *status
	periodic *periodic // nil without schedules
	relays   []*relay
	handover *handover
}

// New returns the leader of one pool.
func New(cfg Config, ledger *ledger.Ledger, leases *lease.Manager) *Leader {
	// The client enqueues periodic ticks and relayed outbox rows. A relayed
	// row is gone from its outbox once enqueued, so after a ledger rewind
	// the client re-submits the enqueues Redis lost: at once when its own
	// enqueue detects it, else at the pool's next Resubmit. Its enqueues
	// wait for replicas as the pool's writes do (jobs.Config.Durability), so
	// a row leaves its outbox only once its job is as durable as any other.
	client := jobs.NewClient(ledger.Redis(), jobs.Config{Namespace: ledger.Namespace(), Retention: ledger.Retention(),
		Logger: cfg.Logger, Registerer: cfg.Registerer, ResubmitOnRewind: true, EnqueueMiddleware: cfg.EnqueueMiddleware,
		Durability: jobs.Durability(ledger.Durability())})
	base := func(name string) service {
		return service{name: name, ledger: ledger, log: cfg.Logger.With("service", name), metrics: cfg.Metrics,
			errors: cfg.Metrics.MaintenanceErrors.WithLabelValues(name)}
	}
	t := &tally{}
	pruned := &queueSet{}
	l := &Leader{
		client: client,
		elector: &elector{leases: leases, owner: cfg.WorkerID, ttl: cfg.LeaseTTL, retry: cfg.Interval,
			log: cfg.Logger, gauge: cfg.Metrics.Leader},
		metrics: cfg.Metrics,
		expirer: &expirer{service: base(metrics.ServiceExpirer), interval: cfg.Interval, batch: ExpireBatch,
			tally: t, decided: cfg.Decided, wake: make(chan struct{}, 1)},
		resolver: &resolver{service: base(metrics.ServiceResolver), interval: cfg.Interval, batch: ResolveBatch,
			workerID: cfg.WorkerID, maxTries: cfg.MaxReconcileTries, timeout: cfg.ReconcileTimeout,
			effectLog: cfg.EffectLog, leases: leases, reconcile: cfg.Reconcile, retryDelay: cfg.RetryDelay, tally: t, decided: cfg.Decided},
		pruner: &pruner{service: base(metrics.ServicePruner), interval: cfg.PruneInterval, effects: cfg.EffectPruner,
			now: ledger.ReadTime, pruned: pruned},
		status: &status{service: base(metrics.ServiceStatus), interval: cfg.Interval, workerID: cfg.WorkerID, tally: t,
			pruned: pruned},
		handover: &handover{service: base(metrics.ServiceHandover), interval: cfg.Interval, grace: cfg.UncommittedGrace,
			now: ledger.ReadTime},
	}
	if len(cfg.Periodic) > 0 {
		l.periodic = &periodic{service: base(metrics.ServicePeriodic), interval: cfg.Interval, client: client,
			schedules: cfg.Periodic, owner: jobs.ScheduleOwner{Pool: cfg.WorkerID, Started: cfg.Started},
			parse: cfg.ParseSchedule, warned: map[string]string{}, conflicted: map[string]bool{}}
	}
	for _, o := range cfg.Outboxes {
		svc := base(metrics.ServiceRelay)
		svc.log = svc.log.With("outbox", o.Name)
		l.relays = append(l.relays, &relay{service: svc, interval: cfg.Interval, client: client, outbox: o, batch: RelayBatch})
	}
	return l
}

// Run competes for leadership until ctx ends and, while leading, runs every
// service on its own interval under the leader lease's context.
func (l *Leader) Run(ctx context.Context) { l.elector.run(ctx, l.serve) }

// serve runs every service until ctx, the leadership's context, ends.
func (l *Leader) serve(ctx context.Context, leader lease.Token) {
	// Only the leader exports job counts: a former leader's would go stale.
	defer l.metrics.Jobs.Reset()
	defer l.metrics.PartitionJobs.Reset()
	defer l.metrics.Groups.Reset()
	defer l.metrics.ScheduleConflicts.Set(0)
	var wg sync.WaitGroup
	for _, t := range l.tasks() {
		wg.Go(func() { t.loop(ctx, leader) })
	}
	wg.Wait()
	// counts only this pool can make (a settle whose reply its passes lost)
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), owedTimeout)
	defer cancel()
	l.handover.settleOwed(octx)
}

func (l *Leader) tasks() []task {
	ts := []task{
		{l.expirer.service, l.expirer.interval, l.expirer.runOnce, l.expirer.wakeUps},
		{l.resolver.service, l.resolver.interval, l.resolver.runOnce, nil},
		{l.status.service, l.status.interval, l.status.runOnce, nil},
		{l.pruner.service, l.pruner.interval, l.pruner.runOnce, nil},
		{l.handover.service, l.handover.interval, l.handover.runOnce, nil},
	}
	if l.periodic != nil {
		ts = append(ts, task{l.periodic.service, l.periodic.interval, l.periodic.runOnce, nil})
	}
	for _, r := range l.relays {
		ts = append(ts, task{r.service, r.interval, r.runOnce, r.outbox.Listen})
	}
	return ts
}

// service is what every maintenance service has: its name (the service
// label of fencedq_maintenance_errors_total and the "service" log field),
// the ledger, a logger naming it, the metrics and its error counter.
type service struct {
	name    string
	ledger  *ledger.Ledger
	log     *slog.Logger
	metrics *metrics.Set
	errors  prometheus.Counter
}

// failed logs and counts one failed part of a pass (one queue, one
// schedule, the effect log) that did not stop the rest of it. Nothing is
// logged or counted once ctx ended: the pool is stopping or lost its
// leadership, and the failure is that cancellation.
func (s service) failed(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		return
	}
	s.errors.Inc()
	s.log.Warn(msg, args...)
}

// eachOf runs f on each of qs (with its index). An error on one queue is
// logged and counted and the others go on; a stale leader token ends the
// pass.
func (s service) eachOf(ctx context.Context, qs []string, f func(i int, q string) error) error {
	for i, q := range qs {
		if err := f(i, q); err != nil {
			if errors.Is(err, jobs.ErrStale) || ctx.Err() != nil {
				return err
			}
			s.failed(ctx, "maintenance pass failed on one queue", "queue", q, "error", err)
		}
	}
	return nil
}

// task is one service as the leader runs it: a pass (runOnce) at once,
// then every interval and on each receive from the channel wake returns
// (called once per leadership, when set); leader is the token every
// ledger write carries.
type task struct {
	service  service
	interval time.Duration
	runOnce  func(ctx context.Context, leader lease.Token) error
	wake     func(ctx context.Context) <-chan struct{}
}

// loop runs the task until ctx ends. A pass that panics or fails is
// logged and counted; the next pass runs on schedule.
func (t task) loop(ctx context.Context, leader lease.Token) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	var wake <-chan struct{}
	if t.wake != nil {
		wake = t.wake(ctx)
	}
	for {
		if err := t.safePass(ctx, leader); err != nil && ctx.Err() == nil {
			t.service.failed(ctx, "maintenance pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-wake:
		}
	}
}

func (t task) safePass(ctx context.Context, leader lease.Token) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return t.runOnce(ctx, leader)
}

// Resubmit re-submits the enqueues this pool's leader terms relayed or
// ticked that a ledger rewind lost (jobs.Client.Resubmit), whether this pool
// leads or not: an outbox row is gone once relayed, so its job exists only
// in the ledger and in this record. The pool calls it with every heartbeat;
// without a rewind it costs a few reads of the queues it enqueued to.
func (l *Leader) Resubmit(ctx context.Context) error {
	_, err := l.client.Resubmit(ctx)
	return err
}
