// Package metrics defines every fencedq Prometheus series in one place, so
// the enqueue client and worker pools sharing a Registerer share series.
package metrics

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Set holds fencedq's Prometheus series. Labels come only from bounded
// sets: queue and kind (registered by code), outcome, stage, reason,
// result, service.
// No label ever holds a job id, operation id, payload or error text.
type Set struct {
	Enqueued        *prometheus.CounterVec   // queue
	Attempted       *prometheus.CounterVec   // queue, kind
	Completed       *prometheus.CounterVec   // queue, kind, outcome
	Deduplicated    *prometheus.CounterVec   // queue, stage
	Rejected        *prometheus.CounterVec   // queue, reason
	Fenced          *prometheus.CounterVec   // queue, stage
	LeaseLost       *prometheus.CounterVec   // queue, kind
	Panics          *prometheus.CounterVec   // queue, kind
	Abandoned       *prometheus.CounterVec   // queue, kind
	CommitsFailed   *prometheus.CounterVec   // queue, result (CommitRefused, CommitNotSent, CommitUnknown, CommitUnacknowledged)
	LeaseWait       *prometheus.HistogramVec // queue, kind
	Duration        *prometheus.HistogramVec // queue, kind, outcome
	Jobs            *prometheus.GaugeVec     // queue, state
	PartitionJobs   *prometheus.GaugeVec     // queue, partition, state (partitioned queues only)
	Groups          *prometheus.GaugeVec     // queue (fair groups with pending jobs; never the group's name)
	Expired         *prometheus.CounterVec   // queue
	Decisions       *prometheus.CounterVec   // queue, result
	ReconcileErrors prometheus.Counter
	// Flow control: jobs held back by a concurrency limit or a rate limit,
	// labelled by the limit's name (its key up to the first ':'), never by
	// the key.
	LimitWaits    *prometheus.CounterVec // queue, limit
	RateDeferrals *prometheus.CounterVec // queue, rate
	// The maintenance leader's own series.
	Leader            prometheus.Gauge
	LastScan          prometheus.Gauge
	ScheduleConflicts prometheus.Gauge
	MaintenanceErrors *prometheus.CounterVec // service
	OutboxSetAside    *prometheus.CounterVec // outbox (its table's name, set by code)
	WorkflowsStarted  *prometheus.CounterVec // queue (the workflow's home)
	WorkflowsFinished *prometheus.CounterVec // queue, outcome
	WorkflowStepsLost *prometheus.CounterVec // queue (the workflow's home)
	// Redis failovers and clocks.
	Rewinds     *prometheus.CounterVec // queue
	Resubmitted *prometheus.CounterVec // queue
	ClockOffset prometheus.Gauge
	ClockJumps  prometheus.Counter
	MayEvict    prometheus.Gauge
	// ReplicasMissing is how many more replicas Durability.Replicas
	// requires than are connected (the largest shortfall of a Cluster's
	// masters); 0 when enough are, or durability is off.
	ReplicasMissing prometheus.Gauge
	// WorkerIDConflicts counts live heartbeats of a pool's WorkerID from
	// another pool that the pool found.
	WorkerIDConflicts prometheus.Counter

	regErr error // the first series the Registerer refused (Err)
}

// Err returns the error of the first series the Registerer refused (one
// of the same name registered there with other labels or help, say), nil
// when it took them all: the Set still counts, but exports that series
// from nowhere.
func (m *Set) Err() error { return m.regErr }

// Label values used by the pool.
const (
	StageEnqueue = "enqueue"
	StageExecute = "execute"
	StageCommit  = "commit"
	StageRenew   = "renew"
	StageStorage = "storage"

	// Results of a pool's commit that failed (an attempt's outcome, or the
	// put-back of a job claimed but not started), the result label of
	// CommitsFailed: Redis refused it (nothing applied), it never reached
	// Redis (nothing applied), its result is unknown (it may have been
	// applied), or it ran on the primary with too few replicas
	// acknowledging it in time.
	CommitRefused        = "refused"
	CommitNotSent        = "not_sent"
	CommitUnknown        = "unknown"
	CommitUnacknowledged = "unacknowledged"

	ReasonMalformed   = "malformed"
	ReasonUnknownKind = "unknown_kind"
	ReasonUnknownJob  = "unknown_job"
	ReasonInvalid     = "invalid"

	// Decisions about uncertain jobs are counted by result: a reconcile
	// verdict's name (jobs.Verdict.String) or ResultReview.
	ResultReview = "review"

	// The maintenance leader's services, the service label of
	// MaintenanceErrors.
	ServiceExpirer  = "expirer"
	ServiceResolver = "resolver"
	ServicePruner   = "pruner"
	ServiceStatus   = "status"
	ServicePeriodic = "periodic"
	ServiceRelay    = "outbox_relay"
	ServiceHandover = "handover"
)

// New registers a worker pool's series on reg (nil: a private registry, so
// nothing is exported) or reuses those already registered there.
func New(reg prometheus.Registerer) *Set { return newSet(reg, true) }

// NewClient is New for an enqueue client or an asynq bridge: the series
// only pools set (the maintenance leader's unlabelled gauges, Redis's clock
// and eviction policy) are not registered, since each would export a
// sample no one set: a maintenance leader of 0 from a process that runs no
// pool (bridges alone need none), a clock offset of 0 never measured.
func NewClient(reg prometheus.Registerer) *Set { return newSet(reg, false) }

func newSet(reg prometheus.Registerer, pool bool) *Set {
	if reg == nil {
		reg = prometheus.NewRegistry() // private: series exist but are not exported
	}
	m := &Set{
		Enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_enqueued_total", Help: "Jobs created by enqueue (deduplicated submissions excluded).",
		}, []string{"queue"}),
		Attempted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_attempted_total", Help: "Attempts started (a claim in the ledger succeeded).",
		}, []string{"queue", "kind"}),
		Completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_completed_total", Help: "Attempts ended, by resulting state (succeeded, pending = retry scheduled, dead, uncertain).",
		}, []string{"queue", "kind", "outcome"}),
		Deduplicated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_deduplicated_total", Help: "Deliveries or enqueues recognised as duplicates, by stage (enqueue, execute).",
		}, []string{"queue", "stage"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_rejected_total", Help: "Jobs rejected, by reason (invalid, unknown_kind, malformed, unknown_job).",
		}, []string{"queue", "reason"}),
		Fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_fenced_rejections_total", Help: "Writes rejected for carrying a stale token, by stage (commit, renew, storage).",
		}, []string{"queue", "stage"}),
		LeaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_leases_lost_total", Help: "Attempts whose lease was lost while the handler ran.",
		}, []string{"queue", "kind"}),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_handler_panics_total", Help: "Handler and middleware panics recovered (retried, unless the handler had returned).",
		}, []string{"queue", "kind"}),
		Abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_handlers_abandoned_total", Help: "Handlers still running when a stopping pool gave up on them, or when their middleware returned while next ran them (each attempt recorded uncertain).",
		}, []string{"queue", "kind"}),
		CommitsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_commits_failed_total", Help: "Jobs whose commit by a pool failed (an attempt's outcome, or the put-back of a job claimed but not started; a job once per failed commit), by result: refused (Redis refused the write: nothing applied), not_sent (it never reached Redis: nothing applied), unknown (it may have been applied), unacknowledged (applied on the primary, too few replicas acknowledged it). Each job is left to its lease's expiry, then the maintenance leader.",
		}, []string{"queue", "result"}),
		LeaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencedq_lease_wait_seconds", Help: "Time a delivery waited for its resource lease.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"queue", "kind"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencedq_handler_duration_seconds", Help: "Handler run time, by resulting state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"queue", "kind", "outcome"}),
		Jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedq_jobs", Help: "Jobs currently in each state (from the ledger indexes; set by the maintenance leader).",
		}, []string{"queue", "state"}),
		PartitionJobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedq_partition_jobs", Help: "A partitioned queue's pending and running jobs per partition (the partition's queue name; set by the maintenance leader).",
		}, []string{"queue", "partition", "state"}),
		Groups: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedq_groups", Help: "Fair groups with pending jobs, per queue (jobs.Group; set by the maintenance leader; no group name label).",
		}, []string{"queue"}),
		Expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_attempts_expired_total", Help: "Running attempts whose lease deadline passed without a commit, moved to uncertain by the maintenance leader's expirer.",
		}, []string{"queue"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_reconcile_decisions_total", Help: "Decisions about uncertain jobs (the resolver's and the asynq bridge's), by result (applied, not_applied, cannot_tell, review).",
		}, []string{"queue", "result"}),
		ReconcileErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedq_reconcile_errors_total", Help: "Reconcile calls that failed or panicked, effect-log lookups that failed, and decisions about uncertain jobs that could not be written.",
		}),
		LimitWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_limit_waits_total", Help: "Due jobs parked because their concurrency limit was full (each waits, not claimed, until a permit frees), by a claim (counted by the pool) or by their enqueue (counted by the client), by the limit's name.",
		}, []string{"queue", "limit"}),
		RateDeferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_rate_deferrals_total", Help: "Due jobs a claim deferred to the earliest start their rate limit allows (no attempt consumed), by the rate's name.",
		}, []string{"queue", "rate"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_maintenance_leader", Help: "1 while this pool is the namespace's maintenance leader (pools sharing a Registerer add up: how many of them lead).",
		}),
		LastScan: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_maintenance_last_scan_timestamp_seconds", Help: "When this pool, as the maintenance leader, last completed a status scan of every queue.",
		}),
		ScheduleConflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_schedule_conflicts", Help: "Periodic schedules of this leader's pool that live pools define differently (a rolling deploy, or pools left on an old definition; set by the maintenance leader's periodic pass).",
		}),
		Rewinds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_ledger_rewinds_total", Help: "Times this process found a queue's ledger gone back: Redis came back with older data (a failover to a lagging replica, a restart from an older snapshot) and acknowledged writes were lost; one loss counts once, however many pools and clients sharing the registry found it.",
		}, []string{"queue"}),
		Resubmitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_resubmitted_total", Help: "Recorded enqueues an enqueue client re-created after a ledger rewind (jobs the rewound ledger had lost).",
		}, []string{"queue"}),
		ClockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_redis_clock_offset_seconds", Help: "Redis's clock (TIME) minus this pool's, measured on each heartbeat from the round trip's midpoint; every lease deadline and due time is on Redis's clock.",
		}),
		MayEvict: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_redis_may_evict", Help: "1 when Redis (a master of a Cluster) has a maxmemory and an eviction policy other than noeviction: under memory pressure it deletes keys, job records and fence marks among them; 0 otherwise. Read every minute.",
		}),
		ReplicasMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_redis_replicas_missing", Help: "How many more replicas Config.Jobs.Durability.Replicas requires than Redis has online (the largest shortfall of a Cluster's masters; 0 when enough are connected, or durability is off): while above 0, every durable claim, completion and enqueue of the pool fails. Read at the start and every minute.",
		}),
		WorkerIDConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedq_worker_id_conflicts_total", Help: "Times this pool found a live heartbeat of its WorkerID from another pool (as it started, which then failed, or at a heartbeat): each live pool needs its own WorkerID.",
		}),
		ClockJumps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedq_redis_clock_jumps_total", Help: "Times Redis's clock jumped backwards against this pool's between two heartbeats (a failover to a node whose clock is behind, or a clock stepped back).",
		}),
		MaintenanceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_maintenance_errors_total", Help: "Maintenance passes that failed, by service (expirer, resolver, pruner, status, periodic, outbox_relay, handover); a pass failing on one queue, one schedule or the effect log counts once for each.",
		}, []string{"service"}),
		OutboxSetAside: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_outbox_rows_set_aside_total", Help: "Outbox rows the maintenance leader's relay set aside because they cannot be enqueued (failed_at and error set; list them with Outbox.Failed, put them back with Outbox.Retry), by outbox table.",
		}, []string{"outbox"}),
		WorkflowsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_workflows_started_total", Help: "Workflows the maintenance leader saw started, by home queue (each counted once, whichever leader saw it).",
		}, []string{"queue"}),
		WorkflowsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_workflows_finished_total", Help: "Workflows the maintenance leader saw finished, by home queue and outcome (succeeded, failed, cancelled; each counted once).",
		}, []string{"queue", "outcome"}),
		WorkflowStepsLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_workflow_steps_lost_total", Help: "Workflow steps the maintenance leader ended lost because their job record was missing while the workflow ran (deleted by hand, or lost with a Redis that came back with older data), by the workflow's home queue; each counts as dead for its dependents.",
		}, []string{"queue"}),
	}
	m.Enqueued = register(reg, m.Enqueued, &m.regErr)
	m.Attempted = register(reg, m.Attempted, &m.regErr)
	m.Completed = register(reg, m.Completed, &m.regErr)
	m.Deduplicated = register(reg, m.Deduplicated, &m.regErr)
	m.Rejected = register(reg, m.Rejected, &m.regErr)
	m.Fenced = register(reg, m.Fenced, &m.regErr)
	m.LeaseLost = register(reg, m.LeaseLost, &m.regErr)
	m.Panics = register(reg, m.Panics, &m.regErr)
	m.Abandoned = register(reg, m.Abandoned, &m.regErr)
	m.CommitsFailed = register(reg, m.CommitsFailed, &m.regErr)
	m.LeaseWait = register(reg, m.LeaseWait, &m.regErr)
	m.Duration = register(reg, m.Duration, &m.regErr)
	m.Jobs = register(reg, m.Jobs, &m.regErr)
	m.PartitionJobs = register(reg, m.PartitionJobs, &m.regErr)
	m.Groups = register(reg, m.Groups, &m.regErr)
	m.Expired = register(reg, m.Expired, &m.regErr)
	m.Decisions = register(reg, m.Decisions, &m.regErr)
	m.ReconcileErrors = register(reg, m.ReconcileErrors, &m.regErr)
	m.LimitWaits = register(reg, m.LimitWaits, &m.regErr)
	m.RateDeferrals = register(reg, m.RateDeferrals, &m.regErr)
	m.MaintenanceErrors = register(reg, m.MaintenanceErrors, &m.regErr)
	m.OutboxSetAside = register(reg, m.OutboxSetAside, &m.regErr)
	m.WorkflowsStarted = register(reg, m.WorkflowsStarted, &m.regErr)
	m.WorkflowsFinished = register(reg, m.WorkflowsFinished, &m.regErr)
	m.WorkflowStepsLost = register(reg, m.WorkflowStepsLost, &m.regErr)
	m.Rewinds = register(reg, m.Rewinds, &m.regErr)
	m.Resubmitted = register(reg, m.Resubmitted, &m.regErr)
	if pool {
		m.Leader = register(reg, m.Leader, &m.regErr)
		m.LastScan = register(reg, m.LastScan, &m.regErr)
		m.ScheduleConflicts = register(reg, m.ScheduleConflicts, &m.regErr)
		m.ClockOffset = register(reg, m.ClockOffset, &m.regErr)
		m.ClockJumps = register(reg, m.ClockJumps, &m.regErr)
		m.MayEvict = register(reg, m.MayEvict, &m.regErr)
		m.ReplicasMissing = register(reg, m.ReplicasMissing, &m.regErr)
		m.WorkerIDConflicts = register(reg, m.WorkerIDConflicts, &m.regErr)
	}
	return m
}

// rewindsCounted holds, per rewinds counter, the losses counted in it
// (CountRewind): a counter's Sets are the pools, their leaders' clients and
// the clients sharing one Registerer.
var rewindsCounted sync.Map // countedLoss -> struct{}

type countedLoss struct {
	c    *prometheus.CounterVec
	loss string
}

// CountRewind counts a ledger rewind of queue once per loss (loss: its
// name, ledger.Ledger.LossID), however many of the detectors sharing this
// Set's counter found it; a loss "" is counted each time.
func (m *Set) CountRewind(queue, loss string) {
	if loss != "" {
		if _, dup := rewindsCounted.LoadOrStore(countedLoss{m.Rewinds, loss}, struct{}{}); dup {
			return
		}
	}
	m.Rewinds.WithLabelValues(queue).Inc()
}

// register adds c to reg; when several pools in one process share a
// Registerer, they share the series already registered. One reg refuses
// is kept unregistered, and the first refusal goes to *failed.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, failed *error) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *failed == nil {
			*failed = fmt.Errorf("the Registerer refused a fencedq series: %w", err)
		}
	}
	return c
}

// MaxFlowNameLabels bounds how many distinct limit and rate names one
// FlowLabels (a pool's, a client's) uses as label values; the names met
// after them count as OtherFlowName. A name is a flow key's part before its
// first ':' (see jobs.Limiter, FlowKeyName), so names chosen per customer
// cannot grow the metrics without bound.
const MaxFlowNameLabels = 50

// OtherFlowName is the label value of the names past MaxFlowNameLabels.
const OtherFlowName = "other"

// UnnamedFlowName is the label value of the flow keys without a name: no
// ':' in them ("cust-42"), or nothing before it. Such a key may be user
// data as a whole, so it is never a label.
const UnnamedFlowName = "unnamed"

// FlowKeyName returns a limit's or rate's name: key's part before its
// first ':', "" when it has none (flow_name in flow.lua, which names the
// keys a claim holds back, agrees).
func FlowKeyName(key string) string {
	name, _, ok := strings.Cut(key, ":")
	if !ok {
		return ""
	}
	return name
}

// FlowLabels turns limit and rate names into bounded label values. The zero
// value is ready to use; it is safe for concurrent use.
type FlowLabels struct {
	mu    sync.Mutex
	names map[string]bool // the names labelled so far
	other bool            // a name was turned away
}

// Label returns the label value for limit or rate name (FlowKeyName):
// UnnamedFlowName for "", else the name while at most MaxFlowNameLabels
// distinct names were labelled, else OtherFlowName; first reports the
// first name turned away (for the caller to warn once).
func (f *FlowLabels) Label(name string) (label string, first bool) {
	if name == "" {
		return UnnamedFlowName, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.names[name]:
		return name, false
	case len(f.names) < MaxFlowNameLabels:
		if f.names == nil {
			f.names = map[string]bool{}
		}
		f.names[name] = true
		return name, false
	}
	first = !f.other
	f.other = true
	return OtherFlowName, first
}
