package worker

import (
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// ClaimEvent is what the Claimed hook carries: one queue's handled claim.
type ClaimEvent = claimEvent

// Decision is what the Decided hook carries: a job and the decision's
// metric result.
type Decision = maintenance.Decision

// Hooks are a pool's test signals (see hooks.go).
type Hooks struct {
	// Claimed: a claim's reply was handled (jobs started, drops counted).
	Claimed *testsignal.Signal[ClaimEvent]
	// Committed: a completion batch came back and was reported.
	Committed *testsignal.Signal[[]ledger.Committed]
	// CommitTried: one try of a completion batch came back, with its
	// error per queue sent.
	CommitTried *testsignal.Signal[[]error]
	// Decided: the maintenance leader's expirer or resolver decided about
	// a job and counted it.
	Decided *testsignal.Signal[Decision]
	// Clocked: a measurement of Redis's clock was handled.
	Clocked *testsignal.Signal[ledger.ClockSample]
	// Looked: an idle look (one read of the earliest due time of every
	// queue not known to be due) was applied; the value is how many
	// queues it read.
	Looked *testsignal.Signal[int]
	// PutBack: claimed jobs were put back without starting.
	PutBack *testsignal.Signal[PutBackEvent]
	// Renewed: a renewal round ended; the value is how many attempts it
	// renewed.
	Renewed *testsignal.Signal[int]
}

// PutBackEvent is what the PutBack hook carries.
type PutBackEvent = putBackEvent

// InitHooks initialises p's test signals for tb; call it before Run.
func InitHooks(p *Pool, tb testsignal.TB) Hooks {
	p.hooks.claimed.Init(tb, "claim handled")
	p.hooks.committed.Init(tb, "completion batch reported")
	p.hooks.commitTried.Init(tb, "completion call tried")
	p.hooks.decided.Init(tb, "maintenance decision counted")
	p.hooks.clocked.Init(tb, "clock measured")
	p.hooks.looked.Init(tb, "idle look applied")
	p.hooks.putBack.Init(tb, "claimed jobs put back")
	p.hooks.renewed.Init(tb, "renewal round ended")
	return Hooks{Claimed: &p.hooks.claimed, Committed: &p.hooks.committed, CommitTried: &p.hooks.commitTried, Decided: &p.hooks.decided, Clocked: &p.hooks.clocked,
		Looked: &p.hooks.looked, PutBack: &p.hooks.putBack, Renewed: &p.hooks.renewed}
}

// SetClockEvery makes p measure Redis's clock (and publish its heartbeat)
// every d instead of every few seconds; call it before Run.
func SetClockEvery(p *Pool, d time.Duration) { p.clockEvery = d }

// PeriodicSpec is what the ledger records of pj, as AddPeriodic compiles it.
func PeriodicSpec(pj *PeriodicJob) (ledger.ScheduleSpec, error) {
	p, err := pj.compile()
	return p.Spec, err
}

// RecordedSchedule builds the ticks of a schedule another pool recorded.
var RecordedSchedule = recordedSchedule

// EvictionEvery is how many heartbeats apart a pool reads the eviction policy.
const EvictionEvery = evictionEvery

// RefusedCommitTries is how many times a stopping pool tries a completion
// call Redis refuses.
const RefusedCommitTries = refusedCommitTries
