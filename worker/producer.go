package worker

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/jobs"
)

// registerEvery is how often a running pool adds its queues to the queue
// registry again (so the registry heals after Redis lost its keys) and
// publishes its heartbeat (id, host, queues, busy slots) for the dashboard
// and the CLI; a heartbeat lapses after three of these.
const registerEvery = 5 * time.Second

// produce is the fetch loop: it claims up to the free slots of due jobs per
// call, hands each to an executor goroutine with a context derived from
// work, and sleeps while nothing is due until a wake-up, the next due time
// or the poll interval. It returns when ctx ends.
func (p *Pool) produce(ctx, work context.Context) {
	wake := p.subscribe(ctx)
	backoff := time.Duration(0)
	lastRegister := time.Now()
	p.announce(ctx)
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = p.ledger.Leave(lctx, p.cfg.WorkerID)
		cancel()
	}()
	for ctx.Err() == nil {
		free := cap(p.slots) - len(p.slots)
		if free == 0 {
			select {
			case <-ctx.Done():
			case <-p.freed:
			}
			continue
		}
		select {
		case <-wake: // a job became due somewhere: revisit idle partitions
			p.parts.woken()
		default:
		}
		_, more, dueIn, err := p.fetch(ctx, work, free)
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
			continue
		}
		// Every queue is drained (or paused): sleep until a wake-up, the
		// next due job, or the poll interval.
		if time.Since(lastRegister) > registerEvery {
			lastRegister = time.Now()
			p.announce(ctx)
		}
		wait := p.cfg.FetchPollInterval
		if dueIn >= 0 && dueIn < wait {
			wait = dueIn
		}
		if wait > 0 {
			p.sleep(ctx, wake, wait)
		}
		p.parts.woken()
	}
}

// announce reads the queues' partitions, registers the pool's queues (a
// partitioned queue's partitions) and publishes its heartbeat.
func (p *Pool) announce(ctx context.Context) {
	if err := p.refreshPartitions(ctx); err != nil {
		p.log.Warn("reading the queues' partitions failed", "error", err)
	}
	if err := p.ledger.RegisterQueues(ctx, p.parts.current()...); err != nil {
		p.log.Warn("queue registration failed", "error", err)
		return
	}
	if err := p.ledger.Heartbeat(ctx, p.info(), 3*registerEvery); err != nil {
		p.log.Warn("heartbeat failed", "error", err)
	}
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

// subscribe listens on the queues' wake-up channels until ctx ends. Lost
// wake-ups (a reconnect) are covered by polling.
func (p *Pool) subscribe(ctx context.Context) <-chan struct{} {
	wake := make(chan struct{}, 1)
	names := p.parts.all()
	channels := make([]string, 0, len(names))
	subbed := make(map[string]bool, len(names))
	for _, q := range names {
		channels = append(channels, p.ledger.NotifyChannel(q))
		subbed[q] = true
	}
	sub := p.rdb.Subscribe(ctx, channels...)
	p.parts.mu.Lock()
	p.parts.sub, p.parts.subbed = sub, subbed
	p.parts.mu.Unlock()
	go func() {
		<-ctx.Done()
		_ = sub.Close()
	}()
	go func() {
		for range sub.Channel() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake
}

// fetch visits the queues in priority order and claims up to free jobs. It
// returns how many it started, whether a queue may have more due jobs (a
// claim got all it asked for, or the slots ran out before every queue was
// visited), and the shortest wait until a pending job left is due (-1:
// unknown or none).
func (p *Pool) fetch(ctx, work context.Context, free int) (started int, more bool, dueIn time.Duration, err error) {
	dueIn = -1
	order, idleUntil := p.parts.expand(p.queueOrder())
	if !idleUntil.IsZero() {
		dueIn = max(time.Until(idleUntil), 0)
	}
	for _, q := range order {
		n := min(free-started, p.cfg.FetchBatch)
		if n <= 0 {
			return started, true, dueIn, nil
		}
		sent := time.Now()
		res, err := p.claim(ctx, q, n)
		if err != nil {
			if res != nil {
				// Too few replicas acknowledged the claim: its jobs are
				// not started, but put back.
				p.putBack(ctx, q, res.Jobs, "the claim was not acknowledged by enough replicas")
			}
			return started, false, dueIn, err
		}
		p.logDropped(q, res.Dropped)
		if ctx.Err() != nil {
			// The pool is stopping: the jobs just claimed go back at once,
			// their attempts not consumed, instead of starting now.
			p.putBack(ctx, q, res.Jobs, "the pool stopped before the attempt started")
			return started, false, dueIn, ctx.Err()
		}
		for _, c := range res.Jobs {
			p.slots <- struct{}{} // never blocks: at most the free slots were claimed
			p.work <- p.newAttempt(work, c, sent)
		}
		started += len(res.Jobs)
		if !res.Paused && len(res.Jobs)+len(res.Dropped) >= n {
			more = true // the claim got all it asked for: there may be more
		}
		if res.DueIn >= 0 && (dueIn < 0 || res.DueIn < dueIn) {
			dueIn = res.DueIn
		}
		p.parts.claimed(q, len(res.Jobs)+len(res.Dropped), res.Paused, res.DueIn, p.cfg.FetchPollInterval)
		p.hooks.claimed.Signal(claimEvent{Queue: q, Result: res})
	}
	return started, more, dueIn, nil
}

// claim claims up to n due jobs of queue q. The call is not cancelled with
// ctx: a claim already sent runs on Redis anyway, and its reply is what
// tells the pool which jobs it holds (bounded by the lease TTL).
func (p *Pool) claim(ctx context.Context, q string, n int) (*ledger.ClaimResult, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
	defer cancel()
	return p.ledger.Claim(cctx, q, p.cfg.WorkerID, p.cfg.LeaseTTL, n)
}

// putBack returns claimed jobs to pending, due now and with their attempt
// not consumed, for reason (a stopping pool's last claim; a claim too few
// replicas acknowledged). Jobs it cannot put back (Redis unreachable, or
// the put-back itself not acknowledged) come back through lease expiry.
// Either way their attempts never start.
func (p *Pool) putBack(ctx context.Context, q string, cs []ledger.Claimed, reason string) {
	if len(cs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
	defer cancel()
	out := make([]ledger.Completion, len(cs))
	for i, c := range cs {
		out[i] = ledger.Completion{ID: c.ID, Token: c.Token,
			Outcome: ledger.Outcome{Defer: true, Reason: reason}}
	}
	defer p.hooks.putBack.Signal(putBackEvent{Queue: q, Jobs: cs, Reason: reason})
	if _, err := p.ledger.Complete(cctx, q, out); err != nil {
		p.log.Warn("claimed jobs not started could not be put back; they come back when their leases expire",
			"queue", q, "jobs", len(cs), "reason", reason, "error", err)
		return
	}
	p.log.Info("claimed jobs put back without starting", "queue", q, "jobs", len(cs), "reason", reason)
}

// queueOrder returns the pool's queues in the order one fetch visits them:
// by priority with StrictPriority, else a random order weighted by priority.
func (p *Pool) queueOrder() []string {
	qs := p.queueNames()
	if len(qs) == 1 {
		return qs
	}
	if p.cfg.StrictPriority {
		slices.SortFunc(qs, func(a, b string) int { return p.cfg.Queues[b] - p.cfg.Queues[a] })
		return qs
	}
	// Weighted random order: repeatedly draw a queue with probability
	// proportional to its priority among those left.
	out := make([]string, 0, len(qs))
	for len(qs) > 0 {
		total := 0
		for _, q := range qs {
			total += p.cfg.Queues[q]
		}
		r := rand.N(total)
		for i, q := range qs {
			r -= p.cfg.Queues[q]
			if r < 0 {
				out = append(out, q)
				qs = append(qs[:i], qs[i+1:]...)
				break
			}
		}
	}
	return out
}

// logDropped explains due-index entries a claim removed without an attempt.
func (p *Pool) logDropped(q string, dropped []ledger.Dropped) {
	for _, d := range dropped {
		switch d.State {
		case "missing":
			p.metrics.Rejected.WithLabelValues(ledger.Logical(q), metrics.ReasonUnknownJob).Inc()
			p.log.Warn("due entry without a job record removed (expired or lost)", "queue", q, "job_id", d.ID)
		case string(jobs.Succeeded), string(jobs.Dead), string(jobs.Cancelled):
			p.metrics.Deduplicated.WithLabelValues(ledger.Logical(q), metrics.StageExecute).Inc()
			p.log.Info("duplicate delivery of a finished job acknowledged without running the handler", "queue", q, "job_id", d.ID, "job_state", d.State)
		default:
			p.log.Info("stale due entry removed: the job is owned elsewhere", "queue", q, "job_id", d.ID, "job_state", d.State)
		}
	}
}

// release frees a handler slot.
func (p *Pool) release() {
	<-p.slots
	select {
	case p.freed <- struct{}{}:
	default:
	}
}
