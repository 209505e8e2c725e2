package worker

import (
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// hooks are signals a test waits on instead of sleeping (see
// internal/testsignal). Each is inert, costing a nil check, unless a test
// initialised it (export_test.go) before Run.
type hooks struct {
	// claimed: one queue's claim came back and was handled (its jobs
	// handed to executors, its dropped entries logged and counted).
	claimed testsignal.Signal[claimEvent]
	// committed: one queue's completion batch came back and each outcome
	// in it was reported (logged and counted).
	committed testsignal.Signal[[]ledger.Committed]
	// commitTried: one try of a completion batch came back; the value is
	// its error per queue it sent (nil where that queue's call succeeded).
	commitTried testsignal.Signal[[]error]
	// decided: the maintenance leader's expirer or resolver decided about
	// a job and counted the decision.
	decided testsignal.Signal[maintenance.Decision]
	// looked: an idle look (Ledger.FirstDue) came back and was applied;
	// the value is how many queues it read.
	looked testsignal.Signal[int]
	// clocked: a measurement of Redis's clock was handled (gauge set,
	// jumps counted and logged).
	clocked testsignal.Signal[ledger.ClockSample]
	// putBack: claimed jobs were put back without starting (or the attempt
	// to put them back failed and was logged).
	putBack testsignal.Signal[putBackEvent]
	// renewed: a renewal round ended; the value is how many attempts it
	// renewed.
	renewed testsignal.Signal[int]
}

// putBackEvent is one put-back of claimed jobs that were never started.
type putBackEvent struct {
	Queue  string
	Jobs   []ledger.Claimed
	Reason string
}

// claimEvent is one handled claim.
type claimEvent struct {
	Queue  string
	Result *ledger.ClaimResult
}
