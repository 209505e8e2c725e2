package worker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// ErrUnsettled means a pool stopped with jobs it had claimed left
// unsettled: Run's error is then a *ShutdownError naming them.
var ErrUnsettled = errors.New("worker: jobs left unsettled at shutdown")

// Reasons an Unsettled job gives.
const (
	// UnsettledAbandoned: its handler was still running when the shutdown
	// timeout and the wait after cancelling its context passed. The pool
	// recorded the attempt uncertain under its token; when that commit
	// failed, Reason says so instead (UnsettledCommitFailed,
	// UnsettledCommitRefused or UnsettledCommitNotSent: the attempt runs
	// in the ledger until its lease lapses). A result the handler returns
	// later is committed only if that token still runs the job.
	UnsettledAbandoned = "handler still running"
	// UnsettledCommitFailed: the outcome's commit failed with an unknown
	// result (Redis unreachable), or so did the put-back of a job claimed
	// as the pool stopped; the job's lease lapses and the maintenance
	// leader resolves it.
	UnsettledCommitFailed = "commit failed"
	// UnsettledCommitRefused: Redis refused the outcome's commit, or the
	// put-back of a job claimed as the pool stopped (READONLY: a primary a
	// failover demoted, still reached by its address; or NOREPLICAS, OOM),
	// so nothing was applied; the job still runs under the attempt's token
	// until its lease lapses, and the maintenance leader resolves it.
	UnsettledCommitRefused = "commit refused"
	// UnsettledCommitNotSent: the outcome's commit, or the put-back of a
	// job claimed as the pool stopped, never reached Redis (no connection
	// could be made, none was free in time, or the client was closed), so
	// nothing was applied; the job still runs under the attempt's token
	// until its lease lapses, and the maintenance leader resolves it.
	UnsettledCommitNotSent = "commit not sent"
	// UnsettledClaimUnknown: a claim sent as the pool stopped got no reply
	// (its connection broke or timed out after Redis may have run it). The
	// entry names the queue only (no ID): the jobs it may have claimed
	// were never read, so they never started; they come back when their
	// leases expire, uncertain.
	UnsettledClaimUnknown = "claim outcome unknown"
)

// Unsettled is one job a stopping pool left behind.
type Unsettled struct {
	// Queue is the job's queue (a partitioned queue's own name, not its
	// partition's).
	Queue string
	// ID is the job's id; empty for UnsettledClaimUnknown.
	ID string
	// Token is the attempt's ledger token; 0 for UnsettledClaimUnknown.
	Token lease.Token
	// Reason is UnsettledAbandoned, UnsettledCommitFailed,
	// UnsettledCommitRefused, UnsettledCommitNotSent or
	// UnsettledClaimUnknown.
	Reason string
}

// ShutdownError is Run's error when the pool stopped with jobs it had
// claimed left unsettled: handlers that ignored their cancelled context,
// outcomes whose commit failed, jobs claimed as it stopped that it
// could not put back, or a claim sent as it stopped whose reply never
// came (its queue only). It matches ErrUnsettled. Each job comes
// back through the ledger (uncertain, reconciled by the maintenance
// leader; or its lease lapses), so a process may exit on it; it is worth
// an alert, not a crash loop.
type ShutdownError struct {
	// Jobs are the jobs left unsettled, by queue and id.
	Jobs []Unsettled
}

// Error names the jobs (ids only: never their args).
func (e *ShutdownError) Error() string {
	parts := make([]string, len(e.Jobs))
	for i, j := range e.Jobs {
		parts[i] = j.Queue + "/" + j.ID + " (" + j.Reason + ")"
		if j.ID == "" {
			parts[i] = j.Queue + " (" + j.Reason + ")"
		}
	}
	return fmt.Sprintf("%v: %d: %s", ErrUnsettled, len(e.Jobs), strings.Join(parts, ", "))
}

// Unwrap returns ErrUnsettled.
func (e *ShutdownError) Unwrap() error { return ErrUnsettled }

// unsettledSet collects the jobs a stopping pool leaves behind.
type unsettledSet struct {
	mu   sync.Mutex
	jobs []Unsettled
}

// add records attempt a's job, once (the first reason given stays).
func (s *unsettledSet) add(a *attempt, reason string) {
	s.record(a.job.Queue, a.job.ID, a.job.Token, reason, false)
}

// commitFailed records that f's commit failed for reason. When f is the
// uncertain record an abandoned attempt was given (abandon), reason
// replaces UnsettledAbandoned, which says that record was made: the
// attempt may still run in the ledger until its lease lapses.
func (s *unsettledSet) commitFailed(f *finished, reason string) {
	s.record(f.a.job.Queue, f.a.job.ID, f.a.job.Token, reason, f != &f.a.fin)
}

// addJob records job id of queue q (a partition's name or a queue's)
// claimed under token, once (the first reason given stays).
func (s *unsettledSet) addJob(q, id string, token lease.Token, reason string) {
	s.record(q, id, token, reason, false)
}

// record records job id of queue q claimed under token with reason, once:
// the first reason given stays, unless replace is set.
func (s *unsettledSet) record(q, id string, token lease.Token, reason string, replace bool) {
	u := Unsettled{Queue: ledger.Logical(q), ID: id, Token: token, Reason: reason}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range s.jobs {
		if j.Queue == u.Queue && j.ID == u.ID && j.Token == u.Token {
			if replace {
				s.jobs[i].Reason = reason
			}
			return
		}
	}
	s.jobs = append(s.jobs, u)
}

// err returns the *ShutdownError for the jobs collected, nil when none.
func (s *unsettledSet) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) == 0 {
		return nil
	}
	js := slices.Clone(s.jobs)
	slices.SortFunc(js, func(a, b Unsettled) int { return strings.Compare(a.Queue+"/"+a.ID, b.Queue+"/"+b.ID) })
	return &ShutdownError{Jobs: js}
}

// abandon gives up on the handlers still running once the shutdown
// timeout and the wait after cancelling their contexts passed: each
// attempt is recorded uncertain under its own token (the completer
// commits it before Run returns, its duration the time the handler ran
// until then), counted and named in Run's error.
// A handler that returns later has its result committed only if its
// token still runs the job (completer.add). It returns the ids and the
// functions registered for the abandoned attempts (JobView.AfterAbandon).
func (p *Pool) abandon() (ids []string, hooks []func()) {
	for _, a := range p.renewer.running() {
		ok, fs := a.abandon()
		if !ok {
			continue // it returned meanwhile: its own outcome is on its way
		}
		ids = append(ids, a.job.ID)
		for _, f := range fs {
			hooks = append(hooks, func() {
				defer func() {
					if r := recover(); r != nil {
						a.log.Error("a function registered with AfterAbandon panicked", "panic", ledger.CapError(fmt.Sprint(r)))
					}
				}()
				f()
			})
		}
		kind := p.kindLabel(a.job.Kind)
		p.metrics.Abandoned.WithLabelValues(ledger.Logical(a.job.Queue), kind).Inc()
		p.unsettled.add(a, UnsettledAbandoned)
		p.completer.add(&finished{a: a, kind: kind, err: errShutdown, elapsed: a.ranFor(), outcome: ledger.Outcome{
			To: jobs.Uncertain, Error: errShutdown.Error(),
			Reason: "worker shut down with the handler still running: abandoned",
		}}, false)
	}
	slices.Sort(ids)
	return ids, hooks
}

// ShutdownGrace bounds how long past ShutdownTimeout Run takes to return
// once its context ends, whatever Redis does: the wait for cancelled
// handlers, then the last commits, and the pool's leave and the leader's
// release. A process manager that stops the pool's process (SIGTERM, then
// SIGKILL) must wait longer than ShutdownTimeout plus ShutdownGrace
// before it kills it (Docker waits 10s by default, Kubernetes 30s):
// killed earlier, the outcomes not yet committed are left to lease expiry
// and reconciling.
const ShutdownGrace = 10 * time.Second
