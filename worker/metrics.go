package worker

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pool's Prometheus series. Labels come only from bounded
// sets: queue and kind (registered by code), outcome, stage, reason, result.
// No label ever holds a job id, operation id, payload or error text.
type metrics struct {
	attempted      *prometheus.CounterVec   // queue, kind
	completed      *prometheus.CounterVec   // queue, kind, outcome
	deduplicated   *prometheus.CounterVec   // queue, stage
	rejected       *prometheus.CounterVec   // queue, reason
	fenced         *prometheus.CounterVec   // queue, stage
	leaseLost      *prometheus.CounterVec   // queue, kind
	panics         *prometheus.CounterVec   // queue, kind
	leaseWait      *prometheus.HistogramVec // queue, kind
	duration       *prometheus.HistogramVec // queue, kind, outcome
	jobs           *prometheus.GaugeVec     // queue, state
	decisions      *prometheus.CounterVec   // queue, result
	leader         prometheus.Gauge
	lastScan       prometheus.Gauge
	reconcileError prometheus.Counter
}

// Label values used by the pool.
const (
	stageEnqueue = "enqueue"
	stageExecute = "execute"
	stageCommit  = "commit"
	stageRenew   = "renew"
	stageStorage = "storage"

	reasonMalformed   = "malformed"
	reasonUnknownKind = "unknown_kind"
	reasonUnknownJob  = "unknown_job"
	reasonInvalid     = "invalid"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // private: series exist but are not exported
	}
	m := &metrics{
		attempted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_attempted_total", Help: "Attempts started (a claim in the ledger succeeded).",
		}, []string{"queue", "kind"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_completed_total", Help: "Attempts ended, by resulting state (succeeded, pending = retry scheduled, dead, uncertain).",
		}, []string{"queue", "kind", "outcome"}),
		deduplicated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_deduplicated_total", Help: "Deliveries or enqueues recognised as duplicates, by stage (enqueue, execute).",
		}, []string{"queue", "stage"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_jobs_rejected_total", Help: "Jobs rejected, by reason (invalid, unknown_kind, malformed, unknown_job).",
		}, []string{"queue", "reason"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_fenced_rejections_total", Help: "Writes rejected for carrying a stale token, by stage (commit, renew, storage).",
		}, []string{"queue", "stage"}),
		leaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_leases_lost_total", Help: "Attempts whose lease was lost while the handler ran.",
		}, []string{"queue", "kind"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_handler_panics_total", Help: "Handler panics recovered (each is retried).",
		}, []string{"queue", "kind"}),
		leaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencedq_lease_wait_seconds", Help: "Time a delivery waited for its resource lease.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"queue", "kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fencedq_handler_duration_seconds", Help: "Handler run time, by resulting state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"queue", "kind", "outcome"}),
		jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencedq_jobs", Help: "Jobs currently in each state (from the ledger indexes; set by the reconciler leader).",
		}, []string{"queue", "state"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedq_reconciler_decisions_total", Help: "Reconciler decisions, by result (expired, applied, not_applied, cannot_tell, review).",
		}, []string{"queue", "result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_reconciler_leader", Help: "1 while this pool's reconciler is the namespace's leader.",
		}),
		lastScan: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedq_reconciler_last_scan_timestamp_seconds", Help: "When this pool's reconciler last completed a scan as leader.",
		}),
		reconcileError: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedq_reconciler_errors_total", Help: "Reconciler scans or decisions that failed (Redis errors, Reconcile errors).",
		}),
	}
	m.attempted = register(reg, m.attempted)
	m.completed = register(reg, m.completed)
	m.deduplicated = register(reg, m.deduplicated)
	m.rejected = register(reg, m.rejected)
	m.fenced = register(reg, m.fenced)
	m.leaseLost = register(reg, m.leaseLost)
	m.panics = register(reg, m.panics)
	m.leaseWait = register(reg, m.leaseWait)
	m.duration = register(reg, m.duration)
	m.jobs = register(reg, m.jobs)
	m.decisions = register(reg, m.decisions)
	m.leader = register(reg, m.leader)
	m.lastScan = register(reg, m.lastScan)
	m.reconcileError = register(reg, m.reconcileError)
	return m
}

// register adds c to reg; when several pools in one process share a
// Registerer, they share the series already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
