package worker

import (
	"context"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// clockJumpSlack is how far Redis's clock may fall back against the pool's
// between two measurements, beyond their round trips' uncertainty, before
// it counts as a jump backwards.
const clockJumpSlack = 500 * time.Millisecond

// clockWatch is what the pool knows of Redis's clock.
type clockWatch struct {
	mu    sync.Mutex
	last  ledger.ClockSample
	jumps int64
	large bool // the last measurement was beyond jobs.ClockOffsetWarn
}

// watchClock measures Redis's clock against the pool's and publishes the
// pool's heartbeat (with the measurement), every clockEvery, until ctx
// ends: busy or idle, the pool stays listed with its offset. With a
// maintenance leader, it then re-submits what a ledger rewind lost of the
// leader's enqueues (relayed outbox rows, periodic ticks).
func (p *Pool) watchClock(ctx context.Context, leader *maintenance.Leader) {
	t := time.NewTicker(p.clockEvery)
	defer t.Stop()
	for beat := 0; ctx.Err() == nil; beat++ {
		if beat%evictionEvery == 0 {
			p.checkEviction(ctx)
		}
		p.measureClock(ctx)
		if err := p.ledger.Heartbeat(ctx, p.info(), 3*registerEvery); err != nil && ctx.Err() == nil {
			p.log.Warn("heartbeat failed", "error", err)
		}
		if leader != nil {
			if err := leader.Resubmit(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("re-submitting the maintenance leader's enqueues lost in a ledger rewind failed; tried again at the next heartbeat", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// measureClock takes one measurement: it sets the offset gauge, and logs
// and counts a jump of Redis's clock backwards (a failover to a node whose
// clock is behind, a clock stepped back) and an offset beyond
// jobs.ClockOffsetWarn. Every lease deadline and due time is on Redis's
// clock; the pool's local deadlines are on its own (monotonic) clock, so an
// offset is harmless to fencing, but a jump moves every deadline in Redis.
func (p *Pool) measureClock(ctx context.Context) {
	s, err := p.ledger.Clock(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("could not measure Redis's clock", "error", err)
		}
		return
	}
	p.metrics.ClockOffset.Set(s.Offset().Seconds())
	w := &p.clock
	w.mu.Lock()
	prev := w.last
	w.last = s
	jumped := false
	var back time.Duration
	if !prev.At.IsZero() {
		back = prev.Offset() - s.Offset()
		slack := clockJumpSlack + time.Duration((prev.RTTMS+s.RTTMS)/2*float64(time.Millisecond))
		if back > slack {
			jumped = true
			w.jumps++
		}
	}
	large := s.Offset().Abs() > jobs.ClockOffsetWarn
	changed := large != w.large
	w.large = large
	w.mu.Unlock()

	if jumped {
		p.metrics.ClockJumps.Inc()
		p.log.Error("Redis's clock jumped backwards: every lease deadline and due time in Redis moved later by as much "+
			"(a failover to a node whose clock is behind, or a clock stepped back)",
			"by", back, "redis_time", s.Redis, "offset", s.Offset(), "previous_offset", prev.Offset())
	}
	switch {
	case changed && large:
		p.log.Warn("Redis's clock is far from this pool's: due times and lease deadlines are on Redis's clock, shown by the dashboard with it",
			"offset", s.Offset(), "rtt", time.Duration(s.RTTMS*float64(time.Millisecond)), "warn_above", jobs.ClockOffsetWarn)
	case changed:
		p.log.Info("Redis's clock is close to this pool's again", "offset", s.Offset())
	}
	p.hooks.clocked.Signal(s)
}

// clockInfo returns the latest measurement and the jumps seen, for the heartbeat.
func (p *Pool) clockInfo() (ledger.ClockSample, int64) {
	p.clock.mu.Lock()
	defer p.clock.mu.Unlock()
	return p.clock.last, p.clock.jumps
}
