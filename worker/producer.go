package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/fencedq/fencedq/internal/durable"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
	"github.com/redis/go-redis/v9"
)

// registerEvery is how often a running pool adds its queues to the queue
// registry again (so the registry heals after Redis lost its keys) and
// publishes its heartbeat (id, host, queues, busy slots) for the dashboard
// and the CLI; a heartbeat lapses after three of these.
const registerEvery = 5 * time.Second

// heartbeatTTL is how long a pool's heartbeat lasts without another.
const heartbeatTTL = 3 * registerEvery

// gatherWindow is how long a pool waits before claiming again when a
// wake-up arrived while its previous claim was in flight: wake-ups then
// coalesce into one claim (and one wake-up message) for the jobs enqueued
// meanwhile, instead of one claim per job. An idle pool woken by a single
// enqueue claims at once.
const gatherWindow = 500 * time.Microsecond

// settleYields bounds how often the fetch loop yields to the executors a
// full claim woke before it counts the free slots again.
const settleYields = 4

// produce is the fetch loop: it claims up to the free slots of due jobs per
// call, hands each to an executor goroutine with a context derived from
// work, and sleeps while nothing is due until a wake-up, the next due time
// or the poll interval. It returns when ctx ends.
//
// It claims only the queues it knows may have due work (see queueSet): a
// queue whose last claim found nothing due is claimed again when a wake-up
// names it, when the job the claim said was next becomes due, or when the
// idle look (one pipelined read of every such queue's earliest due time,
// every FetchPollInterval) shows a due job. An idle queue costs one plain
// read per poll interval, no script.
func (p *Pool) produce(ctx, work context.Context) {
	// A partitioned queue enters the set as its partitions (partitions.go);
	// the set is rebuilt when they change.
	qs := newQueueSet(p.parts.weights(p.cfg.Queues), p.cfg.StrictPriority)
	wake, stopSub := p.subscribeFor(ctx, qs)
	defer func() { stopSub() }()
	p.announce(ctx)
	p.firstLook(ctx, qs)
	backoff := time.Duration(0)
	lastRegister := time.Now()
	lastLook := time.Now()
	for ctx.Err() == nil {
		free := cap(p.slots) - len(p.slots)
		if free == 0 {
			select {
			case <-ctx.Done():
			case <-p.freed:
			}
			continue
		}
		// Busy or idle: a pool that always has due jobs must still see a
		// change of its queues' partitions.
		if time.Since(lastRegister) > registerEvery {
			lastRegister = time.Now()
			p.announce(ctx)
			if p.parts.takeChanged() {
				stopSub()
				qs = newQueueSet(p.parts.weights(p.cfg.Queues), p.cfg.StrictPriority)
				wake, stopSub = p.subscribeFor(ctx, qs)
				p.firstLook(ctx, qs)
			}
		}
		if time.Since(lastLook) >= p.cfg.FetchPollInterval {
			lastLook = time.Now()
			p.lookIdle(ctx, qs)
		}
		qs.takeWoken(time.Now())
		more, next, hasNext, err := p.fetch(ctx, work, free, qs)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
			p.log.Warn("claim failed; retrying", "error", err, "in", backoff)
			p.sleep(ctx, wake, backoff)
			continue
		}
		backoff = 0
		if more {
			p.letExecutorsRun()
			continue
		}
		select {
		case <-wake:
			// A wake-up arrived while the claim was in flight: jobs come
			// faster than a claim takes. Gather a moment, so the next
			// claim takes several instead of one each.
			p.sleep(ctx, nil, gatherWindow)
			continue
		default:
		}
		// Every queue is drained (or paused): sleep until a wake-up, the
		// next due job, or the next idle look.
		wait := p.cfg.FetchPollInterval - time.Since(lastLook)
		if hasNext {
			wait = min(wait, time.Until(next))
		}
		if wait > 0 {
			p.sleep(ctx, wake, wait)
		}
	}
}

// letExecutorsRun yields to the executors the last claim woke while they
// keep freeing slots (at most settleYields times). Handlers that return at
// once then free their slots before the next claim counts them, so it
// takes every free slot, instead of claims alternating between a large
// batch and the few slots freed while the large one was handed out.
// Handlers that block cost a yield with nothing to run.
func (p *Pool) letExecutorsRun() {
	for i, free := 0, -1; i < settleYields; i++ {
		now := cap(p.slots) - len(p.slots)
		if now == free {
			return
		}
		free = now
		runtime.Gosched()
	}
}

// announce reads the queues' partitions, registers the pool's queues (a
// partitioned queue's partitions) and publishes its heartbeat. A call cut
// short by the end of ctx (the pool stopping) is not a failure to report.
func (p *Pool) announce(ctx context.Context) {
	if err := p.refreshPartitions(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("reading the queues' partitions failed", "error", err)
	}
	if err := p.ledger.RegisterQueues(ctx, p.parts.current()...); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("queue registration failed", "error", err)
		}
		return
	}
	p.heartbeat(ctx)
}

// subscribeFor subscribes to qs's wake-ups until ctx ends or stop is
// called (the queue set is replaced).
func (p *Pool) subscribeFor(ctx context.Context, qs *queueSet) (wake <-chan struct{}, stop context.CancelFunc) {
	sctx, stop := context.WithCancel(ctx)
	return p.subscribe(sctx, qs), stop
}

// sleep waits for d, a wake-up or the end of ctx.
func (p *Pool) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	}
}

// subscribe listens on the queues' wake-up channels until ctx ends, marking
// each woken queue in qs. Lost wake-ups (a reconnect) are covered by the idle
// look.
func (p *Pool) subscribe(ctx context.Context, qs *queueSet) <-chan struct{} {
	wake := make(chan struct{}, 1)
	byChannel := make(map[string]int, len(qs.queues))
	channels := make([]string, 0, len(qs.queues))
	for i, q := range qs.queues {
		ch := p.ledger.NotifyChannel(q.name)
		byChannel[ch] = i
		channels = append(channels, ch)
	}
	sub := p.rdb.Subscribe(ctx, channels...)
	// Wait for Redis to confirm the subscription (one SUBSCRIBE: once its
	// first channel is confirmed, every channel is), so the first look that
	// follows and the wake-ups between them miss no job. Without it, a job
	// enqueued just after the look was found only by the next idle look.
	rctx, cancel := context.WithTimeout(ctx, p.cfg.LeaseTTL)
	first, err := sub.Receive(rctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		p.log.Warn("subscribing to the queues' wake-ups failed; the idle look finds their jobs meanwhile", "error", err)
	}
	if m, ok := first.(*redis.Message); ok {
		if i, ok := byChannel[m.Channel]; ok {
			qs.wake(i)
		}
	}
	go func() {
		<-ctx.Done()
		_ = sub.Close()
	}()
	go func() {
		for m := range sub.Channel() {
			if i, ok := byChannel[m.Channel]; ok {
				qs.wake(i)
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake
}

// firstLook replaces a new queue set's "every queue due" with what one
// look at every queue shows (Ledger.ArmAndFirstDue: one pipelined round
// trip that arms each queue's wake-ups, then reads its earliest due time),
// so a starting pool claims only the queues with due jobs instead of each
// queue in turn (over 5 000 queues, 2.4 s before its first job). The look
// comes after the subscription is confirmed, so a job enqueued meanwhile is
// seen by one or the other. When the look fails, every queue stays due.
func (p *Pool) firstLook(ctx context.Context, qs *queueSet) {
	dueIn, err := p.ledger.ArmAndFirstDue(ctx, qs.allNames())
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("the first look at the queues failed; claiming each", "error", err)
		}
		return
	}
	now := time.Now() // counted from the reply's arrival (see lookIdle)
	for i, d := range dueIn {
		if d >= 0 {
			qs.setDue(i, now.Add(d), true)
		} else {
			qs.setDue(i, time.Time{}, false)
		}
	}
	p.hooks.looked.Signal(len(dueIn))
}

// lookIdle reads the earliest due time of every queue not known to be due
// now (one pipelined round trip of plain reads) and marks the queues that
// have due work, or will sooner than the pool knew. It covers wake-ups lost
// on the way (a reconnect of the subscription). A failed look is retried at
// the next poll interval; claims go on meanwhile.
func (p *Pool) lookIdle(ctx context.Context, qs *queueSet) {
	names, idx := qs.notDue(time.Now())
	if len(names) == 0 {
		return
	}
	dueIn, err := p.ledger.FirstDue(ctx, names)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("idle look failed", "error", err)
		}
		return
	}
	// The due times are counted from the reply's arrival: a little late
	// rather than early, so a delayed job is claimed once, when due.
	now := time.Now()
	for j, d := range dueIn {
		if d >= 0 {
			qs.dueBy(idx[j], now.Add(d))
		}
	}
	p.hooks.looked.Signal(len(names))
}

// fetch visits the queues that may have due work, in priority order, and
// claims up to free jobs. It returns whether a queue has more due jobs now
// (a claim left some due, or the slots ran out before every due queue was
// visited) and, when it is known, the earliest moment a queue is due
// (hasNext). A claim that takes a queue's last due jobs says so, so the
// pool does not claim the drained queue again. A queue whose claim fails
// (its node down, say) is backed off on its own and the others are still
// claimed; the error is returned when no claim started a job.
func (p *Pool) fetch(ctx, work context.Context, free int, qs *queueSet) (more bool, next time.Time, hasNext bool, err error) {
	started := 0
	var failed error
	defer func() {
		if failed != nil && err == nil {
			p.log.Warn("claim failed; the queue is claimed again after a back-off, the others go on", "error", failed)
		}
	}()
	for _, i := range qs.order(time.Now()) {
		q := qs.queues[i].name
		n := min(free-started, p.cfg.FetchBatch)
		if n <= 0 {
			return true, time.Time{}, false, nil
		}
		if ctx.Err() != nil {
			// The pool stopped (during the idle look, say): no claim, whose
			// call ctx does not cancel and whose jobs would go back.
			return false, time.Time{}, false, ctx.Err()
		}
		sent := time.Now()
		res, err := p.claim(ctx, q, n)
		if err != nil {
			if res != nil {
				// Too few replicas acknowledged the claim: its jobs are
				// not started, but put back.
				p.putBack(ctx, q, res.Jobs, "the claim was not acknowledged by enough replicas")
			} else if !ledger.NotSent(err) {
				p.lostClaim(ctx, q, err)
			}
			if ctx.Err() != nil {
				return false, time.Time{}, false, err
			}
			failed = fmt.Errorf("queue %s: %w", q, err)
			qs.failed(i, time.Now())
			continue
		}
		qs.queues[i].fails = 0
		p.logDropped(q, res.Dropped)
		if ctx.Err() != nil {
			// The pool is stopping: the jobs just claimed go back at once,
			// their attempts not consumed, instead of starting now.
			p.putBack(ctx, q, res.Jobs, "the pool stopped before the attempt started")
			return false, time.Time{}, false, ctx.Err()
		}
		for _, c := range res.Jobs {
			p.slots <- struct{}{} // never blocks: at most the free slots were claimed
			p.work <- p.newAttempt(work, c, sent)
		}
		started += len(res.Jobs)
		switch {
		case res.Paused:
			// Claimed again at the next idle look that finds it has due
			// jobs, or when resuming it wakes the pool.
			qs.setDue(i, time.Time{}, false)
		case res.DueIn == 0:
			more = true // more jobs are due now
			qs.setDue(i, sent, true)
		case res.DueIn > 0:
			// Counted from the reply's arrival (see lookIdle).
			qs.setDue(i, time.Now().Add(res.DueIn), true)
		default:
			qs.setDue(i, time.Time{}, false) // empty until a wake-up
		}
		p.hooks.claimed.Signal(claimEvent{Queue: q, Result: res})
	}
	if failed != nil && started == 0 {
		return false, time.Time{}, false, failed
	}
	next, hasNext = qs.next()
	return more, next, hasNext, nil
}

// claim claims up to n due jobs of queue q. The call is not cancelled with
// ctx: a claim already sent runs on Redis anyway, and its reply is what
// tells the pool which jobs it holds (bounded by the lease TTL).
func (p *Pool) claim(ctx context.Context, q string, n int) (*ledger.ClaimResult, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
	defer cancel()
	return p.ledger.Claim(cctx, q, p.cfg.WorkerID, p.cfg.LeaseTTL, n)
}

// lostClaim reports a claim of queue q whose reply never came (err): Redis
// may have run it, so jobs may be running in the ledger under tokens the
// pool never read. It can neither start nor put them back; they come back
// when their leases expire, uncertain. A stopping pool names the queue in
// Run's error too (UnsettledClaimUnknown).
func (p *Pool) lostClaim(ctx context.Context, q string, err error) {
	p.log.Warn("claim outcome unknown (its reply was lost): the jobs it may have claimed never start here and come back when their leases expire, uncertain",
		"queue", q, "error", err)
	if ctx.Err() != nil {
		p.unsettled.addJob(q, "", 0, UnsettledClaimUnknown)
	}
}

// putBack returns claimed jobs to pending, due now and with their attempt
// not consumed, for reason (a stopping pool's last claim; a claim too few
// replicas acknowledged). A call that fails with an unknown result (a
// dropped connection) is sent again, as the completer's are, for up to
// commitTimeout within the lease (a put-back applies once: a retry finds
// the job pending). A call that certainly applied nothing (Redis refused
// it, or it was never sent) is sent again as the completer's are too: a
// stopping pool stops after refusedCommitTries tries. Jobs it still cannot
// put back (Redis unreachable or refusing writes, or the put-back itself
// not acknowledged) come back through lease expiry. Either way their
// attempts never start.
func (p *Pool) putBack(ctx context.Context, q string, cs []ledger.Claimed, reason string) {
	if len(cs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(p.cfg.LeaseTTL, commitTimeout))
	defer cancel()
	out := make([]ledger.Completion, len(cs))
	ids := make([]string, len(cs)) // logged: which jobs, not only how many
	for i, c := range cs {
		out[i] = ledger.Completion{ID: c.ID, Token: c.Token,
			Outcome: ledger.Outcome{Defer: true, Reason: reason}}
		ids[i] = c.ID
	}
	defer p.hooks.putBack.Signal(putBackEvent{Queue: q, Jobs: cs, Reason: reason})
	_, err := p.ledger.Complete(cctx, q, out)
	mayHaveRun := !notApplied(err) // a try may have run on Redis
	for tries, backoff := 1, 20*time.Millisecond; err != nil && !errors.Is(err, durable.ErrUnacknowledged) && !errors.Is(err, jobs.ErrInvalid); tries, backoff = tries+1, min(2*backoff, time.Second) {
		if !mayHaveRun && tries >= refusedCommitTries && p.stopping.Err() != nil {
			break // nothing applied: a stopping pool leaves the jobs to their leases
		}
		t := time.NewTimer(backoff)
		select {
		case <-cctx.Done():
		case <-t.C:
		}
		t.Stop()
		if cctx.Err() != nil {
			break
		}
		_, err = p.ledger.Complete(cctx, q, out)
		mayHaveRun = mayHaveRun || !notApplied(err)
	}
	switch {
	case errors.Is(err, durable.ErrUnacknowledged):
		// Applied on the primary: the jobs are pending again there. A
		// failover that loses the put-back brings them back through
		// lease expiry instead.
		p.log.Warn("claimed jobs put back without starting; too few replicas acknowledged the put-back, so after a failover they may come back when their leases expire",
			"queue", q, "jobs", len(cs), "job_ids", ids, "reason", reason, "error", err)
		p.metrics.CommitsFailed.WithLabelValues(ledger.Logical(q), metrics.CommitUnacknowledged).Add(float64(len(cs)))
		return
	case err != nil:
		left, result, msg := UnsettledCommitFailed, metrics.CommitUnknown, "claimed jobs not started could not be put back; they come back when their leases expire"
		switch {
		case !mayHaveRun && refusedWrite(err):
			left, result = UnsettledCommitRefused, metrics.CommitRefused
			msg = "claimed jobs not started could not be put back: Redis refused the write (a read-only replica such as a primary a failover demoted, too few replicas for min-replicas-to-write, or out of memory), nothing was applied; " +
				"they run under the claim's token until their leases expire and then come back"
		case !mayHaveRun:
			left, result = UnsettledCommitNotSent, metrics.CommitNotSent
			msg = "claimed jobs not started could not be put back: the call never reached Redis (no connection could be made, none was free in time, or the client was closed), nothing was applied; " +
				"they run under the claim's token until their leases expire and then come back"
		}
		p.log.Warn(msg, "queue", q, "jobs", len(cs), "job_ids", ids, "reason", reason, "error", err)
		p.metrics.CommitsFailed.WithLabelValues(ledger.Logical(q), result).Add(float64(len(cs)))
		if p.stopping.Err() != nil { // named in Run's error, as a failed commit is
			for _, c := range cs {
				p.unsettled.addJob(q, c.ID, c.Token, left)
			}
		}
		return
	}
	p.log.Info("claimed jobs put back without starting", "queue", q, "jobs", len(cs), "job_ids", ids, "reason", reason)
}

// logDropped explains due-index entries a claim removed without an attempt.
func (p *Pool) logDropped(q string, dropped []ledger.Dropped) {
	for _, d := range dropped {
		// the name ("" for a key without one) is logged as labelled
		if name, ok := strings.CutPrefix(d.State, "limit:"); ok {
			label := p.flowLabel(name)
			p.metrics.LimitWaits.WithLabelValues(ledger.Logical(q), label).Inc()
			p.log.Debug("job parked until its concurrency limit frees a permit", "queue", q, "job_id", d.ID, "limit", label)
			continue
		}
		if name, ok := strings.CutPrefix(d.State, "rate:"); ok {
			label := p.flowLabel(name)
			p.metrics.RateDeferrals.WithLabelValues(ledger.Logical(q), label).Inc()
			p.log.Debug("job deferred to the next start its rate limit allows", "queue", q, "job_id", d.ID, "rate", label)
			continue
		}
		switch d.State {
		case "missing":
			p.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonUnknownJob).Inc()
			p.log.Warn("due entry without a job record removed (expired or lost)", "queue", q, "job_id", d.ID)
		case "corrupt":
			p.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonMalformed).Inc()
			p.log.Warn("job record holds an unknown state (edited or corrupt): moved to review", "queue", q, "job_id", d.ID)
		case "corrupt_flow":
			p.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonMalformed).Inc()
			p.log.Warn("job record's limit or rate fields are corrupt (edited by hand): moved to review", "queue", q, "job_id", d.ID)
		case string(jobs.Succeeded), string(jobs.Dead), string(jobs.Cancelled):
			p.metrics.Deduplicated.WithLabelValues(ledger.Logical(q), metrics.StageExecute).Inc()
			p.log.Info("duplicate delivery of a finished job acknowledged without running the handler", "queue", q, "job_id", d.ID, "job_state", d.State)
		default:
			p.log.Info("stale due entry removed: the job is owned elsewhere", "queue", q, "job_id", d.ID, "job_state", d.State)
		}
	}
}

// flowLabel is the metric label of limit or rate name (see
// series.flowName), warning once when names start counting as "other".
func (p *Pool) flowLabel(name string) string {
	label, first := p.series.flowName(name)
	if first {
		p.log.Warn("more distinct limit and rate names than metric labels allow; the rest count as \""+metrics.OtherFlowName+"\": name a flow key's fixed part before a ':' (\"export:<customer>\")",
			"labels", metrics.MaxFlowNameLabels)
	}
	return label
}

// release frees a handler slot.
func (p *Pool) release() {
	<-p.slots
	select {
	case p.freed <- struct{}{}:
	default:
	}
}
