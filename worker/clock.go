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
	last  ledger.ClockSample            // the farthest master's, last measured
	nodes map[string]ledger.ClockSample // each master's, last measured, by its slots ("" off a cluster)
	jumps int64
	large bool // the offset was last found beyond jobs.ClockOffsetWarn
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
			if beat > 0 { // the start read the replicas just now
				p.checkReplicas(ctx, false)
			}
		}
		p.measureClock(ctx)
		p.heartbeat(ctx)
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
// jobs.ClockOffsetWarn. Every lease deadline and due time is on the
// namespace's time, which an offset in its clock record carries across a
// jump (internal/epoch's epoch_now); the pool's local deadlines are on its
// own (monotonic) clock. A jump is still a node's clock to fix.
// On a Redis Cluster each master is measured and compared with the last
// measurement of its slots (a failover's successor serves the same), and
// the gauge and the heartbeat carry the master farthest from the pool's
// clock: masters whose clocks differ are not a jump.
func (p *Pool) measureClock(ctx context.Context) {
	ss, err := p.ledger.Clocks(ctx)
	if err != nil || len(ss) == 0 {
		if err != nil && ctx.Err() == nil {
			p.log.Debug("could not measure Redis's clock", "error", err)
		}
		return
	}
	s := ledger.Farthest(ss)
	p.metrics.ClockOffset.Set(s.Offset().Seconds())
	w := &p.clock
	w.mu.Lock()
	w.last = s
	jumps := w.compare(ss)
	w.jumps += int64(len(jumps))
	// The offset is within half the round trip of the measured one: a slow
	// reply (a paused or busy Redis) that leaves it either side of the
	// warning changes nothing.
	large, off, half := w.large, s.Offset().Abs(), time.Duration(s.RTTMS/2*float64(time.Millisecond))
	switch {
	case off-half > jobs.ClockOffsetWarn:
		large = true
	case off+half <= jobs.ClockOffsetWarn:
		large = false
	}
	changed := large != w.large
	w.large = large
	w.mu.Unlock()

	for _, j := range jumps {
		p.metrics.ClockJumps.Inc()
		attrs := []any{"by", j.back, "redis_time", j.now.Redis, "offset", j.now.Offset(), "previous_offset", j.prev.Offset()}
		if j.now.Node != "" {
			attrs = append(attrs, "node", j.now.Node, "slots", j.now.Slots)
		}
		p.log.Error("Redis's clock jumped backwards (a failover to a node whose clock is behind, or a clock stepped back): "+
			"the namespace's time, which lease deadlines and due times are on, goes on from where it was through its clock record's offset, "+
			"so none moved unless that record was lost too; fix the node's clock (NTP), and the offset drops to 0 once it is back", attrs...)
	}
	switch {
	case changed && large:
		p.log.Warn("Redis's clock is far from this pool's: due times and lease deadlines are on the namespace's time (Redis's clock plus its offset), which the dashboard shows them with; fix the clock that is off (NTP)",
			"offset", s.Offset(), "rtt", time.Duration(s.RTTMS*float64(time.Millisecond)), "warn_above", jobs.ClockOffsetWarn)
	case changed:
		p.log.Info("Redis's clock is close to this pool's again", "offset", s.Offset())
	}
	p.hooks.clocked.Signal(s)
}

// clockJump is one master's clock found moved back against the pool's.
type clockJump struct {
	now, prev ledger.ClockSample
	back      time.Duration
}

// compare compares each sample with the last one of its slots and records
// it as the last, under w.mu. A measurement that misses some slots (a
// CLUSTER SLOTS reply from a node that has not yet learnt of a failover
// names the promoted master by its address) leaves their last sample in
// place, so the next one of those slots is still compared with it.
func (w *clockWatch) compare(ss []ledger.ClockSample) []clockJump {
	if w.nodes == nil {
		w.nodes = make(map[string]ledger.ClockSample, len(ss))
	}
	var jumps []clockJump
	for _, n := range ss {
		prev, ok := w.nodes[n.Slots]
		w.nodes[n.Slots] = n
		if !ok {
			continue
		}
		back := prev.Offset() - n.Offset()
		slack := clockJumpSlack + time.Duration((prev.RTTMS+n.RTTMS)/2*float64(time.Millisecond))
		if back > slack {
			jumps = append(jumps, clockJump{now: n, prev: prev, back: back})
		}
	}
	return jumps
}

// clockInfo returns the latest measurement and the jumps seen, for the heartbeat.
func (p *Pool) clockInfo() (ledger.ClockSample, int64) {
	p.clock.mu.Lock()
	defer p.clock.mu.Unlock()
	return p.clock.last, p.clock.jumps
}
