package jobs

import (
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Version is the fencedq version pools publish in their heartbeat.
var Version = "dev"

// DefaultNamespace is the key prefix used when none is given.
const DefaultNamespace = "fq"

// DefaultRetention is how long finished jobs are kept when no Retention is given.
const DefaultRetention = 7 * 24 * time.Hour

// State is a job's state in the ledger (ARCHITECTURE.md has the state table).
type State = ledger.State

// The job states.
const (
	// Pending jobs wait in the queue until due (new, scheduled, retry
	// scheduled, deferred, or re-run).
	Pending State = "pending"
	// Running jobs have a live attempt holding a token.
	Running State = "running"
	// Succeeded jobs are done; a redelivery is deduplicated.
	Succeeded State = "succeeded"
	// Dead jobs failed permanently or exhausted their retries.
	Dead State = "dead"
	// Cancelled jobs were cancelled by an operator before they could finish.
	Cancelled State = "cancelled"
	// Uncertain jobs may or may not have applied their side effect; the
	// reconciler resolves them.
	Uncertain State = "uncertain"
	// Review jobs wait for an operator's decision.
	Review State = "review"
)

// States lists every state in display order.
var States = ledger.States

// Decision is how an uncertain or review job is resolved.
type Decision = ledger.Decision

// Decisions.
const (
	// DecideSucceeded marks the job succeeded (its effect is known applied).
	DecideSucceeded Decision = "succeeded"
	// DecideRerun sends the job back to pending, due now; its next attempt
	// gets a new, higher token.
	DecideRerun Decision = "rerun"
	// DecideDead marks the job dead.
	DecideDead Decision = "dead"
	// DecideReview hands the job to an operator.
	DecideReview Decision = "review"
	// DecideLater keeps the job where it is and schedules another look.
	DecideLater Decision = "later"
)

// Record is one job as the ledger holds it: its state, args (redacted),
// attempt, token, owner, deadline, times and outcome.
type Record = ledger.Record

// Entry is one line of a job's history (Inspector.History).
type Entry = ledger.Entry

// Event is one line of a queue's recent-event feed: a fenced rejection, a
// deduplication or an operator action (Inspector.Events).
type Event = ledger.Event

// Pause says who paused a queue, when and why (Inspector.Paused).
type Pause = ledger.Pause

// PoolInfo is a live pool's heartbeat (Inspector.Pools).
type PoolInfo = ledger.PoolInfo

// KindRules say what a kind's Go type does beyond its JSON (Validate, a
// Resource, sensitive fields): pools publish them for the kinds they run,
// and EnqueueRaw refuses a kind that has any (see EnqueueRaw).
type KindRules = ledger.KindRules

// ClockSample is one measurement of Redis's clock against a process's own
// (PoolInfo.Clock, Inspector.Clock).
type ClockSample = ledger.ClockSample

// ClockOffsetWarn is the offset between Redis's clock and a pool's (or the
// dashboard's) beyond which pools log a warning and the dashboard shows
// one: due times and lease deadlines are on Redis's clock, a RunAt on the
// client's.
const ClockOffsetWarn = time.Second

// ScheduleSpec defines a periodic schedule.
type ScheduleSpec = ledger.ScheduleSpec

// Schedule is a registered periodic schedule and its progress
// (Inspector.Schedules).
type Schedule = ledger.Schedule

// Tick is one tick of a periodic schedule: when, and the job it enqueued.
type Tick = ledger.Tick

// SeriesBucket is a per-minute snapshot of one queue's counters and state
// counts (Inspector.Series).
type SeriesBucket = ledger.SeriesBucket

// SeriesStep is the width of one history bucket.
const SeriesStep = time.Minute

// Limits on the names every entry point accepts (the client, the worker's
// configuration, the operator commands). A name outside them is rejected
// with an error matching ErrInvalid that states the rule, before anything
// is written.
//
//	namespace     1-64 bytes of letters, digits and . _ : -
//	queue         1-100 bytes of letters, digits and . _ : -
//	kind          1-100 bytes of UTF-8, no whitespace, control characters or braces
//	resource      1-512 bytes of UTF-8, no control characters or braces
//	operation id  1-200 bytes of UTF-8, no control characters
//	schedule id   1-100 bytes of letters, digits and . _ -
const (
	MaxNamespaceLen   = 64
	MaxQueueLen       = 100
	MaxKindLen        = 100
	MaxResourceLen    = 512
	MaxOperationIDLen = 200
	MaxScheduleIDLen  = 100
)

// Limits on a job's headers (see Header).
const (
	MaxHeaders        = ledger.MaxHeaders
	MaxHeaderKeyLen   = ledger.MaxHeaderKeyLen
	MaxHeaderValueLen = ledger.MaxHeaderValueLen
	MaxHeadersBytes   = ledger.MaxHeadersBytes
)

// ValidateNamespace checks a key namespace (see the limits above).
func ValidateNamespace(ns string) error { return ledger.ValidateNamespace(ns) }

// ValidateQueue checks a queue name (see the limits above).
func ValidateQueue(q string) error { return ledger.ValidateQueue(q) }

// ValidateQueueRef checks a name the read API and operator actions take: a
// queue's, or one of its partitions' ("q#k" or "q#k.s", as Record.Queue
// names the partition holding a job of a partitioned queue).
func ValidateQueueRef(q string) error { return ledger.ValidateQueueRef(q) }

// ValidateKind checks a job kind (see the limits above).
func ValidateKind(kind string) error { return ledger.ValidateKind(kind) }

// ValidateResource checks a resource name (see the limits above).
func ValidateResource(resource string) error { return ledger.ValidateResource(resource) }

// ValidateOperationID checks an operation id (see the limits above).
func ValidateOperationID(op string) error { return ledger.ValidateOperationID(op) }

// ValidateScheduleID checks a periodic schedule's id (see the limits above).
func ValidateScheduleID(id string) error { return ledger.ValidateScheduleID(id) }

// LeaseResource is the lease resource of job id: its Resource when it names
// one, else a per-job resource.
func LeaseResource(id, resource string) string { return ledger.LeaseResource(id, resource) }

// PeriodicOperationPrefix starts the operation id of every job a periodic
// schedule enqueues.
const PeriodicOperationPrefix = "periodic:"

// PeriodicOperationID is the operation id of schedule id's tick at t: one
// job per tick, whichever pool enqueues it.
func PeriodicOperationID(id string, t time.Time) string { return ledger.PeriodicOperationID(id, t) }

// ParsePeriodicOperationID splits an operation id made by
// PeriodicOperationID; ok is false for any other.
func ParsePeriodicOperationID(op string) (id string, tick time.Time, ok bool) {
	return ledger.ParsePeriodicOperationID(op)
}
