package jobs

import (
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Version, when set at link time, is the version pools publish in their
// heartbeat (see [BuildVersion]):
//
//	go build -ldflags "-X github.com/fencedq/fencedq/jobs.Version=v1.2.3" ./...
//
// The repository's Dockerfile sets it from its VERSION build argument.
var Version string

// modulePath is the library's module path; the commands' and the tracing
// integration's modules are below it.
const modulePath = "github.com/fencedq/fencedq"

// BuildVersion returns the version pools publish in their heartbeat:
// [Version] when it was set at link time; else the library's version as
// the binary's build information records it (the version an application
// required, e.g. v1.2.3, or the pseudo-version the go command stamped on a
// build of this repository); else the commit the binary was built from
// ("devel+<12 hex digits>", "+dirty" with local changes); else "(devel)".
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	return buildVersion(Version, bi, ok)
}

// buildVersion is BuildVersion over given build information.
func buildVersion(linked string, bi *debug.BuildInfo, ok bool) string {
	if linked != "" {
		return linked
	}
	if !ok || bi == nil {
		return "(devel)"
	}
	known := func(v string) bool { return v != "" && v != "(devel)" }
	for _, d := range bi.Deps {
		if d.Path != modulePath {
			continue
		}
		if d.Replace != nil && known(d.Replace.Version) {
			return d.Replace.Version
		}
		if d.Replace == nil && known(d.Version) {
			return d.Version
		}
	}
	if (bi.Main.Path == modulePath || strings.HasPrefix(bi.Main.Path, modulePath+"/")) && known(bi.Main.Version) {
		return bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev != "" {
		return "devel+" + rev[:min(12, len(rev))] + dirty
	}
	return "(devel)"
}

// DefaultNamespace is the key prefix used when none is given.
const DefaultNamespace = "fq"

// DefaultRetention is how long finished jobs are kept when no Retention is given.
const DefaultRetention = 7 * 24 * time.Hour

// State is a job's state in the ledger (ARCHITECTURE.md has the state table).
type State = ledger.State

// The job states, declared one by one so that go doc lists them with State.

// Pending jobs wait in the queue until due (new, scheduled, retry
// scheduled, deferred, or re-run).
const Pending State = "pending"

// Running jobs have a live attempt holding a token.
const Running State = "running"

// Succeeded jobs are done; a redelivery is deduplicated.
const Succeeded State = "succeeded"

// Dead jobs failed permanently or exhausted their retries.
const Dead State = "dead"

// Cancelled jobs were cancelled by an operator before they could finish.
const Cancelled State = "cancelled"

// Uncertain jobs may or may not have applied their side effect; the
// reconciler resolves them.
const Uncertain State = "uncertain"

// Review jobs wait for an operator's decision.
const Review State = "review"

// Waiting is a workflow step whose dependencies have not all succeeded
// (see package workflow): it is never claimed, and becomes pending once
// they have.
const Waiting State = "waiting"

// States lists every state in display order.
var States = ledger.States

// Decision is how an uncertain or review job is resolved.
type Decision = ledger.Decision

// Decisions.
const (
	// DecideSucceeded marks the job succeeded (its effect is known applied).
	DecideSucceeded Decision = "succeeded"
	// DecideRerun sends the job back to pending, due now, on a new run
	// (an operator's explicit re-run); its next attempt gets a new, higher
	// token. A reconciler's verdict "not applied" is a failed attempt
	// instead: retried after its backoff, or dead once its attempts are spent.
	DecideRerun Decision = "rerun"
	// DecideDead marks the job dead.
	DecideDead Decision = "dead"
	// DecideReview hands the job to an operator.
	DecideReview Decision = "review"
	// DecideLater keeps the job where it is and schedules another look.
	DecideLater Decision = "later"
)

// Record is one job as the ledger holds it (Inspector.Get, Find, List):
// its state, args (redacted), attempt, token, deadline, times and outcome.
// Fields left empty or zero do not apply to the job. Its fields:
//
// Identity:
//   - ID is the job's id; OperationID its operation id (the id itself
//     when none was given), which deduplicates enqueues and effects.
//   - Kind is the job's kind; Queue the name of the queue holding it (a
//     partition's name, "q#k", on a partitioned queue).
//   - Resource is the resource its attempts lease, "" when the job itself
//     (see its LeaseResource method).
//   - Bridge is the queue that delivers a bridged job ("asynq"); "" for
//     native jobs.
//
// State and attempts:
//   - State is the job's state; Reason why it is in it (a retry's, a
//     dead job's, an operator's note), and Error the last failed
//     attempt's error text.
//   - Token is the fencing token of its last attempt (0 before its first
//     claim); Fence the resource lease's token of that attempt, when it
//     leased a named resource.
//   - Owner is the last attempt's worker id. With Token (or Fence) it is
//     the attempt's credential, so it is never encoded as JSON.
//   - Deadline is the running attempt's lease deadline, by Redis's clock.
//   - Attempts counts its attempts; MaxRetries is how many retries follow
//     a failed attempt; Timeout bounds each attempt's handler (0: the
//     pool's HandlerTimeout).
//   - Runs counts its re-runs (see Seen); ReconcileTries the reconciler's
//     "cannot tell" answers since it became uncertain; KindDefers the
//     times it was put back because no pool knew its kind.
//   - CancelledBy names the operator who asked to cancel it.
//
// Times:
//   - Created is when it was enqueued; RunAt when it was due (for a
//     pending job read by Get, its retry's or deferral's due time when
//     later).
//   - Started is when its last attempt started; Finished when it reached
//     a final state; UncertainSince when it became uncertain.
//   - Updated is the latest of those times not in the future.
//
// Content:
//   - Args is the JSON args with sensitive fields redacted; Payload the
//     raw JSON args, sensitive fields included, never encoded as JSON:
//     never show it.
//   - Headers are the headers given at enqueue, shown as they are.
//   - Progress is the latest progress an attempt reported (Progress), nil
//     when none did; Output what the successful attempt recorded
//     (RecordOutput), sensitive fields redacted.
//   - UniqueKey is a unique job's key in its queue's unique index
//     (Redacted when its args had values redacted); UniqueStates the
//     states in which it holds it.
//
// Workflow and flow control:
//   - Workflow, WorkflowHome and Step name the workflow a step belongs to,
//     the queue holding the workflow's record and the step's name.
//   - LimitKey and LimitMax are its concurrency limit (Limiter); RateKey,
//     RateMax and RatePer its rate limit (RateLimiter); Group its fair
//     group (Grouper).
//   - WaitingFor says, filled by Get for a pending job held back, what it
//     waits for ("limit export:cust-42, 5 of 5 held", "group acme, 3
//     ahead").
type Record = ledger.Record

// Entry is one line of a job's history (Inspector.History).
//
// go doc github.com/fencedq/fencedq/internal/ledger.Entry lists its fields.
type Entry = ledger.Entry

// Event is one line of a queue's recent-event feed: a fenced rejection, a
// deduplication or an operator action (Inspector.Events).
//
// go doc github.com/fencedq/fencedq/internal/ledger.Event lists its fields.
type Event = ledger.Event

// Pause says who paused a queue, when and why (Inspector.Paused).
//
// go doc github.com/fencedq/fencedq/internal/ledger.Pause lists its fields.
type Pause = ledger.Pause

// PoolInfo is a live pool's heartbeat (Inspector.Pools).
//
// go doc github.com/fencedq/fencedq/internal/ledger.PoolInfo lists its fields.
type PoolInfo = ledger.PoolInfo

// KindRules say what a kind's Go type does beyond its JSON (Validate, a
// Resource, sensitive fields): pools publish them for the kinds they run,
// and EnqueueRaw refuses a kind that has any (see EnqueueRaw).
//
// go doc github.com/fencedq/fencedq/internal/ledger.KindRules lists its fields.
type KindRules = ledger.KindRules

// ClockSample is one measurement of Redis's clock against a process's own
// (PoolInfo.Clock, Inspector.Clock).
//
// go doc github.com/fencedq/fencedq/internal/ledger.ClockSample lists its fields.
type ClockSample = ledger.ClockSample

// ClockOffsetWarn is the offset between Redis's clock and a pool's (or the
// dashboard's) beyond which pools log a warning and the dashboard shows
// one: due times and lease deadlines are on Redis's clock, a RunAt on the
// client's.
const ClockOffsetWarn = time.Second

// ScheduleSpec defines a periodic schedule.
//
// go doc github.com/fencedq/fencedq/internal/ledger.ScheduleSpec lists its fields.
type ScheduleSpec = ledger.ScheduleSpec

// Schedule is a registered periodic schedule and its progress
// (Inspector.Schedules).
//
// go doc github.com/fencedq/fencedq/internal/ledger.Schedule lists its fields.
type Schedule = ledger.Schedule

// ScheduleOwner is the pool whose definition of a periodic schedule is
// recorded (Schedule.Owner).
//
// go doc github.com/fencedq/fencedq/internal/ledger.ScheduleOwner lists its fields.
type ScheduleOwner = ledger.ScheduleOwner

// ScheduleConflict is a pool's definition of a periodic schedule that
// lost to the recorded one (Schedule.Conflict).
//
// go doc github.com/fencedq/fencedq/internal/ledger.ScheduleConflict lists its fields.
type ScheduleConflict = ledger.ScheduleConflict

// Tick is one tick of a periodic schedule: when, and the job it enqueued.
//
// go doc github.com/fencedq/fencedq/internal/ledger.Tick lists its fields.
type Tick = ledger.Tick

// SeriesBucket is a per-minute snapshot of one queue's counters and state
// counts (Inspector.Series).
//
// go doc github.com/fencedq/fencedq/internal/ledger.SeriesBucket lists its fields.
type SeriesBucket = ledger.SeriesBucket

// SeriesStep is the width of one history bucket.
const SeriesStep = time.Minute

// MinuteCounts are one queue's exact counts over one minute
// (Inspector.Minutes): the counters added during the minute, by name
// (enqueued, attempted, succeeded, dead, cancelled, retried, uncertain,
// resolved_review, fenced_commit, fenced_renew, deduplicated_enqueue,
// deduplicated_execute, ...).
//
// go doc github.com/fencedq/fencedq/internal/ledger.MinuteCounts lists its fields.
type MinuteCounts = ledger.MinuteCounts

// MinuteKeep is how long a minute's counts are kept.
const MinuteKeep = ledger.MinuteKeep

// Limits on the names every entry point accepts (the client, the worker's
// configuration, the operator commands). A name outside them is rejected
// with an error matching ErrInvalid that states the rule, before anything
// is written.
//
//	namespace     1-64 bytes of letters, digits and . _ : -
//	queue         1-100 bytes of letters, digits and . _ : -, not "." nor ".."
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

// ValidateHeaders checks a job's headers against the limits of Header
// (MaxHeaders, MaxHeaderKeyLen, MaxHeaderValueLen, MaxHeadersBytes), as an
// enqueue does: an error matching ErrInvalid when they exceed them.
func ValidateHeaders(h map[string]string) error { return ledger.ValidateHeaders(h) }

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

// ValidateActor checks the name of an operator recorded with an action
// (Client.Resolve, Cancel, Pause and the others): once surrounding spaces
// are trimmed, 1 to MaxActorLen bytes of UTF-8 without control characters.
// An error matches ErrInvalid.
func ValidateActor(actor string) error {
	actor = strings.TrimSpace(actor)
	switch {
	case actor == "":
		return invalid("an operator action needs the operator's name")
	case len(actor) > MaxActorLen:
		return invalid("operator name longer than %d bytes", MaxActorLen)
	case !utf8.ValidString(actor) || strings.ContainsFunc(actor, unicode.IsControl):
		return invalid("operator name %q must be UTF-8 without control characters", ledger.Clip(actor))
	}
	return nil
}

// ValidateNote checks the note recorded with an operator action: at most
// MaxNoteLen bytes of UTF-8 whose only control characters are line feeds
// and tabs. An error matches ErrInvalid.
func ValidateNote(note string) error {
	switch {
	case len(note) > MaxNoteLen:
		return invalid("note longer than %d bytes", MaxNoteLen)
	case !utf8.ValidString(note) || strings.ContainsFunc(note, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return invalid("note %q must be UTF-8 whose only control characters are line feeds and tabs", ledger.Clip(note))
	}
	return nil
}

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
