package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	rules "github.com/fencedq/fencedq/internal/attempt"
	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// commitTimeout bounds how long shutdown waits for handlers whose contexts
// it cancelled, and how long the completer keeps retrying a batch that
// failed with an unknown result (Redis unreachable) at least: a running
// pool retries it while any of its attempts' leases is still held.
const commitTimeout = 5 * time.Second

// refusedCommitTries is how many times a completion call that certainly
// applied nothing (Redis refused it, or it was never sent) is tried at
// least, and at most once the pool is stopping: a client that reconnects
// (a failover client, whose connection to a demoted primary go-redis
// closes on READONLY; a dial that a restarting Redis accepts again) may
// reach a primary that takes it.
const refusedCommitTries = 3

// finished is an attempt's outcome on its way to the ledger.
type finished struct {
	a       *attempt
	outcome ledger.Outcome
	err     error // the handler's error, for the log
	elapsed time.Duration
	kind    string // the metric label
	slot    bool   // it keeps its executor's slot until the completer takes it (see add)
}

// completer applies outcomes in batches: one call per queue carries every
// outcome that arrived while the previous call was in flight (up to
// CompleteBatch), each applied only if its token still runs the job. Then
// it releases the attempts' resource leases.
type completer struct {
	p      *Pool
	mu     sync.Mutex
	queue  []*finished   // outcomes handed over, not yet taken (guarded by mu)
	closed bool          // guarded by mu
	kick   chan struct{} // wakes run when queue or closed changed
	flyMu  sync.Mutex    // guards flying
	flying []*finished   // the batch being committed
}

func newCompleter(p *Pool) *completer {
	return &completer{p: p, kick: make(chan struct{}, 1)}
}

// backlog is how many outcomes wait for the completer before a further
// one keeps its slot (add).
func (c *completer) backlog() int { return 2 * c.p.cfg.Concurrency }

// add hands an outcome over; it never waits for Redis, so neither an
// executor nor a shutdown abandoning a handler is held by stalled commits.
// An executor's outcome (holdSlot) arriving while backlog() others wait
// keeps the executor's slot until the completer takes it: add reports so,
// the executor then leaves the slot to the completer, and the pool claims
// no more than it can commit. After close (the late result of a handler
// the stopping pool abandoned), the outcome is committed at once, in the
// caller's goroutine, and applied only if its token still runs the job:
// the pool recorded the attempt uncertain under that token, so it applies
// only where that record failed.
func (c *completer) add(f *finished, holdSlot bool) (slotKept bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.complete(context.Background(), [][]*finished{{f}})
		return false
	}
	f.slot = holdSlot && len(c.queue) >= c.backlog()
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	c.wake()
	return f.slot
}

func (c *completer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close ends the input; run applies what is left and returns.
func (c *completer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wake()
}

// take removes up to CompleteBatch outcomes from the queue, releasing the
// slots they kept; it reports false once the queue is empty and closed.
func (c *completer) take() ([]*finished, bool) {
	for {
		c.mu.Lock()
		if n := min(len(c.queue), c.p.cfg.CompleteBatch); n > 0 {
			batch := slices.Clone(c.queue[:n])
			clear(c.queue[:n])
			c.queue = c.queue[n:]
			if len(c.queue) == 0 {
				c.queue = nil // drop the array a long backlog grew
			}
			c.mu.Unlock()
			for _, f := range batch {
				if f.slot {
					c.p.release()
				}
			}
			return batch, true
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, false
		}
		<-c.kick
	}
}

func (c *completer) run(ctx context.Context) {
	for {
		batch, ok := c.take()
		if !ok {
			return
		}
		c.flush(ctx, batch)
	}
}

// giveUp names as unsettled the outcomes not known to be committed when
// a shutdown stops waiting for a Redis that does not answer: the batch in
// flight (it may still land) and those not yet sent, which are dropped.
func (c *completer) giveUp() {
	c.flyMu.Lock()
	left := slices.Clone(c.flying)
	c.flyMu.Unlock()
	flying := len(left) // the batch in flight reports itself when its call returns
	c.mu.Lock()
	left = append(left, c.queue...)
	c.queue = nil
	c.mu.Unlock()
	for i, f := range left {
		c.p.unsettled.commitFailed(f, UnsettledCommitFailed)
		if i >= flying && f == &f.a.fin { // never sent: no commit will report it
			f.a.committed(Commit{})
		}
	}
}

// flush applies one batch: one ledger call per queue, sent together.
func (c *completer) flush(ctx context.Context, batch []*finished) {
	c.flyMu.Lock()
	c.flying = batch
	c.flyMu.Unlock()
	defer func() {
		c.flyMu.Lock()
		c.flying = nil
		c.flyMu.Unlock()
	}()
	if oneQueue(batch) { // the common case: no map
		c.complete(ctx, [][]*finished{batch})
		return
	}
	var groups [][]*finished
	byQueue := map[string]int{}
	for _, f := range batch {
		i, ok := byQueue[f.a.job.Queue]
		if !ok {
			i = len(groups)
			byQueue[f.a.job.Queue] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], f)
	}
	c.complete(ctx, groups)
}

// oneQueue reports whether every outcome of batch is of one queue.
func oneQueue(batch []*finished) bool {
	for _, f := range batch[1:] {
		if f.a.job.Queue != batch[0].a.job.Queue {
			return false
		}
	}
	return true
}

// complete applies groups, each the outcomes of one queue, retrying the
// queues whose call failed with an unknown result (Redis unreachable) for
// commitTimeout or, in a running pool, until the last local deadline of
// their attempts' leases (a Redis that stalls for longer than
// commitTimeout still takes the outcomes its leases allow), then reports
// every outcome and releases the attempts' resource leases. A queue's
// call Redis refused or that was never sent, no try of it having possibly
// run, is certainly not applied: it is retried only as retryNotApplied
// allows, and reported as refused or not sent, its jobs left to their
// leases' expiry.
func (c *completer) complete(ctx context.Context, groups [][]*finished) {
	qs := make([]ledger.QueueCompletions, len(groups))
	for g, fs := range groups {
		cs := make([]ledger.Completion, len(fs))
		for i, f := range fs {
			cs[i] = ledger.Completion{ID: f.a.job.ID, Token: f.a.job.Token, Outcome: f.outcome}
			if l := f.a.resourceLease(); l != nil {
				cs[i].Fence = l.Token // recorded even when it equals the job's token
			}
		}
		qs[g] = ledger.QueueCompletions{Queue: fs[0].a.job.Queue, Completions: cs}
	}
	until := time.Now().Add(commitTimeout)
	if c.p.stopping.Err() == nil {
		for _, fs := range groups {
			for _, f := range fs {
				if d := f.a.local.Deadline(); d.After(until) {
					until = d
				}
			}
		}
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), until)
	defer cancel()
	outs, errs := make([][]ledger.Committed, len(groups)), make([]error, len(groups))
	retried := make([]bool, len(groups)) // a group's call was sent again
	// unacked: a try of the group's call ran on the primary, too few
	// replicas acknowledging it (durable mode; made on the first)
	var unacked []bool
	// mayHaveRun: a try of the group's call failed in a way that may come
	// after Redis ran it (neither refused by Redis nor never sent; made on
	// the first)
	var mayHaveRun []bool
	todo := make([]int, len(groups)) // the groups not yet settled
	for g := range todo {
		todo[g] = g
	}
	for tries, backoff := 1, 20*time.Millisecond; ; tries, backoff = tries+1, min(2*backoff, time.Second) {
		call := make([]ledger.QueueCompletions, len(todo))
		for j, g := range todo {
			call[j] = qs[g]
		}
		o, e := c.p.ledger.CompleteAll(cctx, call)
		c.p.hooks.commitTried.Signal(e)
		var again []int
		for j, g := range todo {
			outs[g], errs[g] = o[j], e[j]
			if e[j] == nil {
				continue
			}
			if errors.Is(e[j], durable.ErrUnacknowledged) {
				if unacked == nil {
					unacked = make([]bool, len(groups))
				}
				unacked[g] = true
			}
			nothing := notApplied(e[j])
			if !nothing {
				if mayHaveRun == nil {
					mayHaveRun = make([]bool, len(groups))
				}
				mayHaveRun[g] = true
			}
			if errors.Is(e[j], jobs.ErrInvalid) || cctx.Err() != nil {
				continue
			}
			if nothing && (mayHaveRun == nil || !mayHaveRun[g]) && !c.retryNotApplied(groups[g], tries, backoff) {
				continue
			}
			again = append(again, g)
		}
		if len(again) == 0 {
			break
		}
		for _, g := range again {
			retried[g] = true
		}
		todo = again
		select {
		case <-cctx.Done():
		case <-time.After(backoff):
		}
	}
	var wg sync.WaitGroup
	for g, fs := range groups {
		out, err := outs[g], errs[g]
		// unapplied: every try was refused by Redis or never sent, so
		// nothing was applied (the last try says which)
		unapplied := err != nil && (mayHaveRun == nil || !mayHaveRun[g])
		for i, f := range fs {
			left, result := UnsettledCommitFailed, metrics.CommitUnknown
			switch {
			case err != nil && unacked != nil && unacked[g]:
				result = metrics.CommitUnacknowledged
				f.a.log.Error("commit ran on the primary but was not acknowledged by enough replicas in time: applied there unless a newer attempt owned the job, "+
					"it stands unless a failover loses it, and then the maintenance leader resolves the job after its lease expires", "wanted", f.outcome.To, "error", err)
			case unapplied && refusedWrite(err):
				left, result = UnsettledCommitRefused, metrics.CommitRefused
				f.a.log.Error("commit refused by Redis (a read-only replica such as a primary a failover demoted, too few replicas for min-replicas-to-write, or out of memory): nothing was applied; "+
					"the job runs under this attempt's token until its lease expires, and then the maintenance leader resolves it", "wanted", f.outcome.To, "error", err)
			case unapplied:
				left, result = UnsettledCommitNotSent, metrics.CommitNotSent
				f.a.log.Error("commit not sent to Redis (the error says why): nothing was applied; "+
					"the job runs under this attempt's token until its lease expires, and then the maintenance leader resolves it", "wanted", f.outcome.To, "error", err)
			case err != nil:
				f.a.log.Error("commit failed with an unknown result; the maintenance leader resolves the job after its lease expires",
					"wanted", f.outcome.To, "error", err)
			}
			if err != nil {
				c.p.metrics.CommitsFailed.WithLabelValues(ledger.Logical(f.a.job.Queue), result).Inc()
				if c.p.stopping.Err() != nil {
					c.p.unsettled.commitFailed(f, left)
				}
			} else {
				out[i] = c.report(f, out[i], retried[g])
			}
			if f == &f.a.fin { // the attempt's own outcome, not the one its abandonment recorded
				var got Commit
				if err == nil {
					got = Commit{Applied: out[i].Applied, Refused: !out[i].Applied, State: out[i].State}
				}
				f.a.committed(got)
			}
			f.a.cancel(nil)
			if l := f.a.resourceLease(); l != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = c.p.leases.Release(cctx, l)
				}()
			}
		}
		if err == nil {
			c.p.hooks.committed.Signal(out)
		}
	}
	wg.Wait()
}

// refusedWrite reports whether err is Redis's refusal of a write: the
// call applied nothing.
func refusedWrite(err error) bool {
	return errors.Is(err, jobs.ErrWriteRefused) || errors.Is(err, jobs.ErrOutOfMemory)
}

// notApplied reports whether a failed ledger write certainly applied
// nothing: Redis refused it (refusedWrite), or it never reached Redis
// (ledger.NotSent).
func notApplied(err error) bool {
	return refusedWrite(err) || ledger.NotSent(err)
}

// retryNotApplied reports whether a call of fs's outcomes that applied
// nothing on its tries-th try (refused by Redis, or never sent) is tried
// again after backoff: up to refusedCommitTries tries, and past them while
// the pool runs and the lease of one of its attempts still holds by then
// (a try that reaches a primary taking writes meanwhile takes the
// outcomes those leases allow). A stopping pool does not wait on a Redis
// that refuses its writes or cannot be reached: the jobs are left to their
// leases' expiry.
func (c *completer) retryNotApplied(fs []*finished, tries int, backoff time.Duration) bool {
	if tries < refusedCommitTries {
		return true
	}
	if c.p.stopping.Err() != nil {
		return false
	}
	next := time.Now().Add(backoff)
	for _, f := range fs {
		if f.a.local.Deadline().After(next) {
			return true
		}
	}
	return false
}

// report logs and counts one committed outcome and returns it as the pool
// understood it (a retried call that found its own outcome applied).
func (c *completer) report(f *finished, got ledger.Committed, retried bool) ledger.Committed {
	q, log := f.a.job.Queue, f.a.log
	wanted := f.outcome.To
	if f.outcome.Defer {
		wanted = jobs.Pending
	}
	if !got.Applied {
		if retried && got.Current == f.a.job.Token && rules.Reached(wanted, got.State) {
			// A retried call found the job already ended by this very
			// token as this outcome would end it: the first call applied
			// before its reply was lost.
			got.Applied = true
		} else {
			c.p.metrics.Fenced.WithLabelValues(ledger.Logical(q), metrics.StageCommit).Inc()
			msg := "commit rejected: a newer attempt owns the job; this attempt's outcome is discarded"
			switch {
			case got.State == "missing" || got.State == "corrupt": // complete.lua's words for no or no job's state
				msg = "commit rejected: the job's record is gone or corrupt; this attempt's outcome is discarded"
			case got.Current == f.a.job.Token:
				// No attempt ran since: the job left running under this
				// token, made uncertain (then maybe reconciled).
				msg = "commit rejected: the job left running under this attempt's token before the commit (its lease expired, or the stopping pool abandoned the attempt) and no newer attempt ran; this attempt's outcome is discarded"
			}
			log.Warn(msg, "wanted", wanted, "job_state", got.State, "job_token", got.Current.String(), "handler_error", ledger.CapError(errText(f.err)))
			return got
		}
	}
	if f.outcome.Defer {
		return got
	}
	ser := c.p.series.complete(c.p.metrics, q, f.kind, string(got.State))
	ser.count.Inc()
	ser.duration.Observe(f.elapsed.Seconds())
	level, msg := slog.LevelWarn, "job failed, retry scheduled"
	switch got.State {
	case jobs.Succeeded:
		level, msg = slog.LevelDebug, "job succeeded"
	case jobs.Uncertain:
		level, msg = slog.LevelWarn, "job outcome uncertain; the maintenance leader will reconcile it"
	case jobs.Dead:
		level, msg = slog.LevelError, "job dead"
	case jobs.Cancelled:
		level, msg = slog.LevelInfo, "job cancelled"
	}
	if !log.enabled(level) {
		return got
	}
	attrs := []any{"state", got.State, "duration", f.elapsed}
	if f.err != nil {
		attrs = append(attrs, "error", ledger.CapError(f.err.Error()))
	}
	if f.outcome.Reason != "" {
		attrs = append(attrs, "reason", f.outcome.Reason)
	}
	log.log(level, msg, attrs...)
	return got
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
