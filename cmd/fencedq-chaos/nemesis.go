package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// Fault kinds.
const (
	faultPause        = "pause"
	faultKill         = "kill"
	faultRedisRestart = "redis_restart"
	faultStall        = "proxy_stall"
	faultSlow         = "proxy_slow"
	faultLongPause    = "long_pause"
)

// faultEvent is one fault the nemesis injected.
type faultEvent struct {
	At       string `json:"at"` // since the start of the fault phase
	Kind     string `json:"kind"`
	Target   string `json:"target"`
	Duration string `json:"duration,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Error    string `json:"error,omitempty"`
}

// nemesis injects faults at random until its context ends. It runs two
// lanes: processes (pause, kill, redis restart) and the network between
// the workers and PostgreSQL (stall, slow), plus, with --long-pauses, a
// third lane of long pauses spread over the run.
//
// With --failover the Redis faults have a lane of their own, spaced by
// --failover-gap: the failovers (failoverRedis.failover) and Redis restarts,
// which there restart the replica (a crashed primary is what the failovers
// are); the process lane keeps pauses and kills.
type nemesis struct {
	o       *options
	workers *workers
	redis   *redisServer   // single-server mode
	cluster []*redisServer // cluster mode: the masters, restarted one at a time
	fo      *failoverRedis // failover mode
	cf      *clusterRedis  // cluster failover mode
	start   time.Time
	out     func(format string, a ...any)

	mu        sync.Mutex
	rng       *rand.Rand
	counts    map[string]int
	events    []faultEvent
	failovers []failoverRecord
}

// newNemesis prepares a nemesis over the run's workers and Redis (r, or fo
// in failover mode).
func newNemesis(o *options, w *workers, r *redisServer, fo *failoverRedis, out func(string, ...any)) *nemesis {
	return &nemesis{o: o, workers: w, redis: r, fo: fo, out: out,
		rng: rand.New(rand.NewPCG(o.Seed, 0xfa017)), counts: map[string]int{}}
}

// float returns a random number in [0, 1).
func (n *nemesis) float() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.Float64()
}

// intn returns a random number in [0, k).
func (n *nemesis) intn(k int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.IntN(k)
}

// between returns a random duration in [lo, hi).
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.float()*float64(hi-lo))
}

// record logs a fault and counts it unless it failed.
func (n *nemesis) record(e faultEvent) {
	e.At = time.Since(n.start).Round(10 * time.Millisecond).String()
	n.mu.Lock()
	if e.Error == "" {
		n.counts[e.Kind]++
	}
	n.events = append(n.events, e)
	n.mu.Unlock()
	if e.Error != "" {
		n.out("fault %s on %s failed: %s", e.Kind, e.Target, e.Error)
	}
}

// count returns how many faults of kind were injected.
func (n *nemesis) count(kind string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts[kind]
}

// Counts returns the number of faults injected per kind.
func (n *nemesis) Counts() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{faultPause: 0, faultKill: 0, faultRedisRestart: 0, faultStall: 0, faultSlow: 0, faultLongPause: 0}
	for _, k := range n.o.FailoverKinds {
		out[k] = 0
	}
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// Events returns the fault log.
func (n *nemesis) Events() []faultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]faultEvent{}, n.events...)
}

// Failovers returns the failovers made, in order.
func (n *nemesis) Failovers() []failoverRecord {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]failoverRecord{}, n.failovers...)
}

// run injects faults until ctx ends; every fault in progress is undone
// (paused workers resumed, proxies healed) before it returns.
func (n *nemesis) run(ctx context.Context) {
	n.start = time.Now()
	var wg sync.WaitGroup
	type lane struct {
		kinds  []string
		limits []int
		gap    time.Duration
	}
	lanes := []lane{
		{[]string{faultPause, faultKill, faultRedisRestart}, []int{n.o.MaxPauses, n.o.MaxKills, n.o.MaxRedisRestarts}, n.o.FaultGap},
		{[]string{faultStall, faultSlow}, []int{n.o.MaxStalls, n.o.MaxSlowdowns}, n.o.FaultGap},
	}
	if n.fo != nil || n.cf != nil {
		lanes[0] = lane{[]string{faultPause, faultKill}, []int{n.o.MaxPauses, n.o.MaxKills}, n.o.FaultGap}
		redisLane := lane{[]string{faultRedisRestart}, []int{n.o.MaxRedisRestarts}, n.o.FailoverGap}
		for _, k := range n.o.FailoverKinds {
			redisLane.kinds = append(redisLane.kinds, k)
			redisLane.limits = append(redisLane.limits, n.o.MaxFailovers)
		}
		lanes = append(lanes, redisLane)
	}
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.lane(ctx, l.kinds, l.limits, l.gap)
		}()
	}
	if n.o.LongPauses > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.longPauses(ctx)
		}()
	}
	wg.Wait()
}

// lane injects one fault at a time: first each kind once in random order
// (so even a short run sees every fault), then kinds at random among those
// under their limit.
func (n *nemesis) lane(ctx context.Context, kinds []string, limits []int, gap time.Duration) {
	var first []string
	for i, k := range kinds {
		if limits[i] > 0 {
			first = append(first, k)
		}
	}
	n.mu.Lock()
	n.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	n.mu.Unlock()
	// A short first gap: the first faults land while work is flowing.
	if !sleepCtx(ctx, n.between(gap/4, gap)) {
		return
	}
	for ctx.Err() == nil {
		var kind string
		if len(first) > 0 {
			kind, first = first[0], first[1:]
		} else {
			var open []string
			for i, k := range kinds {
				if n.count(k) < limits[i] {
					open = append(open, k)
				}
			}
			if len(open) == 0 {
				return
			}
			kind = open[n.intn(len(open))]
		}
		n.inject(ctx, kind)
		if !sleepCtx(ctx, n.between(gap/2, gap*3/2)) {
			return
		}
	}
}

// longPauses spreads --long-pauses pauses over the run.
func (n *nemesis) longPauses(ctx context.Context) {
	per := n.o.Duration / time.Duration(n.o.LongPauses)
	for i := range n.o.LongPauses {
		at := time.Duration(i)*per + n.between(0, per/2)
		if !sleepCtx(ctx, time.Until(n.start.Add(at))) {
			return
		}
		n.inject(ctx, faultLongPause)
	}
}

// pickSlot takes a random slot not under another process fault.
func (n *nemesis) pickSlot() *slot {
	slots := n.workers.slots
	off := n.intn(len(slots))
	for i := range slots {
		s := slots[(off+i)%len(slots)]
		if s.take() {
			return s
		}
	}
	return nil
}

// inject performs one fault of kind and undoes it (resume, heal) before
// returning.
func (n *nemesis) inject(ctx context.Context, kind string) {
	switch kind {
	case faultPause, faultLongPause:
		d := n.between(n.o.LeaseTTL*3/2, n.o.LeaseTTL*3)
		if kind == faultLongPause {
			d = n.o.LongPause
		}
		s := n.pickSlot()
		if s == nil {
			return
		}
		defer s.release()
		id := s.currentID()
		if err := s.pause(); err != nil {
			n.record(faultEvent{Kind: kind, Target: id, Error: err.Error()})
			return
		}
		t0 := time.Now()
		sleepCtx(ctx, d)
		s.resume()
		n.record(faultEvent{Kind: kind, Target: id, Duration: time.Since(t0).Round(time.Millisecond).String()})
	case faultKill:
		s := n.pickSlot()
		if s == nil {
			return
		}
		defer s.release()
		id := s.currentID()
		s.kill()
		// A moment of absence, then a new process takes the slot.
		sleepCtx(ctx, n.between(0, 500*time.Millisecond))
		ev := faultEvent{Kind: kind, Target: id}
		if err := n.workers.start(s); err != nil {
			ev.Detail = "not restarted: " + err.Error()
		} else {
			ev.Detail = "replaced by " + s.currentID()
		}
		n.record(ev)
	case faultRedisRestart:
		sig, how := syscall.SIGKILL, "SIGKILL"
		if n.float() < 0.3 {
			sig, how = syscall.SIGTERM, "SIGTERM"
		}
		down := n.between(0, time.Second)
		t0 := time.Now()
		target := "redis-server"
		var err error
		if n.fo != nil {
			var addr string
			addr, err = n.fo.restartReplica(ctx, sig, down)
			target = "replica " + addr
		} else if n.cf != nil {
			var addr string
			addr, err = n.cf.restartReplica(ctx, n.intn(n.o.Cluster), sig, down)
			target = "replica " + addr
		} else if len(n.cluster) > 0 {
			s := n.cluster[n.intn(len(n.cluster))]
			target = "master " + s.Addr
			err = s.restart(ctx, sig, down)
		} else {
			err = n.redis.restart(ctx, sig, down)
		}
		ev := faultEvent{Kind: kind, Target: target, Duration: time.Since(t0).Round(time.Millisecond).String(), Detail: how}
		if err != nil {
			ev.Error = err.Error()
		}
		n.record(ev)
	case faultFailover, faultFailoverLagging, faultFailoverClock:
		p := failoverPlan{kind: kind}
		if kind != faultFailover {
			// The setting: the replica cut off seconds before the
			// kill, well within what the Sentinel still promotes.
			p.cut = n.between(3*time.Second, 5*time.Second)
		}
		if kind == faultFailoverClock {
			p.offset = n.o.ClockOffset
		}
		t0 := time.Now()
		rec, err := n.fo.failover(ctx, p)
		ev := faultEvent{Kind: kind, Target: "primary " + rec.From, Duration: time.Since(t0).Round(time.Millisecond).String()}
		if !rec.Killed.IsZero() {
			// A kill happened: whatever followed, the checker must know.
			n.mu.Lock()
			n.failovers = append(n.failovers, rec)
			n.mu.Unlock()
			ev.Detail = fmt.Sprintf("promoted %s after %s", rec.To, rec.Failover)
			if p.cut > 0 {
				ev.Detail += fmt.Sprintf(", replication cut %s before the kill", rec.Killed.Sub(rec.Cut).Round(time.Millisecond))
			}
			if kind == faultFailoverClock {
				ev.Detail += ", its clock shifted " + p.offset.String()
			}
		}
		if err != nil {
			ev.Error = err.Error()
		}
		n.record(ev)
	case faultClusterKill, faultClusterKillLagging, faultClusterCoordinated:
		n.clusterFailover(ctx, kind)
	case faultStall, faultSlow:
		targets := n.workers.slots
		target := "all workers"
		if n.float() < 0.75 {
			s := targets[n.intn(len(targets))]
			targets, target = []*slot{s}, fmt.Sprintf("proxy of slot %d", s.n)
		}
		var d time.Duration
		detail := ""
		if kind == faultStall {
			d = n.between(n.o.HandlerTimeout*5/4, n.o.HandlerTimeout*5/2)
			for _, s := range targets {
				s.proxy.stall(d)
			}
		} else {
			d = n.between(2*time.Second, 6*time.Second)
			lat := n.between(100*time.Millisecond, 500*time.Millisecond)
			detail = "latency " + lat.Round(time.Millisecond).String()
			for _, s := range targets {
				s.proxy.setLatency(lat)
			}
		}
		t0 := time.Now()
		sleepCtx(ctx, d)
		for _, s := range targets {
			s.proxy.heal()
		}
		n.record(faultEvent{Kind: kind, Target: target, Duration: time.Since(t0).Round(time.Millisecond).String(), Detail: detail})
	}
}

// currentID returns the id of the slot's current process.
func (s *slot) currentID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// sleepCtx sleeps d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
