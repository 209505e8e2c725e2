package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A pool measures Redis's clock against its own: the offset is exported,
// published in the heartbeat and warned about when large; a jump of Redis's
// clock backwards is logged at error level and counted.
func TestPoolMeasuresRedisClock(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	srv.SetClockOffset(3 * time.Second)
	before, err := srv.Client().Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	e, reg, h := beating(t, srv.Client(), 20*time.Millisecond)

	// A measurement is within half its round trip of the true offset (the
	// reply is placed at the round trip's midpoint), however slow the
	// machine; 5 ms more for rounding.
	near := func(s ledger.ClockSample, want time.Duration) bool {
		return (s.Offset() - want).Abs() <= time.Duration(s.RTTMS/2*float64(time.Millisecond))+5*time.Millisecond
	}
	s := h.Clocked.WaitOrTimeout()
	if !near(s, 3*time.Second) || s.RTTMS < 0 {
		t.Fatalf("first measurement %+v, want an offset of about 3s", s)
	}
	// The gauge holds the latest measurement's offset, maybe one taken
	// since s.
	if v := metricSum(t, reg, "fencedq_redis_clock_offset_seconds"); v < 1 || v > 5 {
		t.Fatalf("fencedq_redis_clock_offset_seconds = %v, want about 3", v)
	}
	// A heartbeat follows each measurement, so one with the offset is out
	// by the next measurement; the pool's first heartbeat, sent at its
	// start before any measurement, may land after it, and the one after
	// the next measurement replaces it.
	var ps []jobs.PoolInfo
	for i := 0; ; i++ {
		h.Clocked.WaitOrTimeout()
		ps, err = e.client.Inspector().Pools(context.Background())
		if err == nil && len(ps) == 1 && !ps[0].Clock.At.IsZero() {
			break
		}
		if i == 10 {
			t.Fatalf("pools %+v, %v after %d measurements: want the pool's heartbeat with its offset", ps, err, i+1)
		}
	}
	if !near(ps[0].Clock, 3*time.Second) {
		t.Fatalf("pools %+v: want the pool's heartbeat with its offset of about 3s", ps)
	}
	// The start time is Redis's (it orders pools, e.g. for periodic
	// definitions), not the pool's own clock 3 s behind.
	if ps[0].Started.Before(before) {
		t.Fatalf("the pool started at %v, before Redis's time %v read ahead of it: not Redis's clock", ps[0].Started, before)
	}
	if !strings.Contains(e.logs.String(), "Redis's clock is far from this pool's") {
		t.Fatal("a 3s offset is not warned about")
	}
	if v := metricSum(t, reg, "fencedq_redis_clock_jumps_total"); v != 0 {
		t.Fatalf("jumps counted before any: %v", v)
	}

	// Redis's clock steps 10 minutes back (a failover to a node behind).
	srv.SetClockOffset(-10 * time.Minute)
	for s = h.Clocked.WaitOrTimeout(); !near(s, -10*time.Minute); s = h.Clocked.WaitOrTimeout() {
	}
	if v := metricSum(t, reg, "fencedq_redis_clock_jumps_total"); v != 1 {
		t.Fatalf("fencedq_redis_clock_jumps_total = %v, want 1", v)
	}
	if !strings.Contains(e.logs.String(), `"level":"ERROR","msg":"Redis's clock jumped backwards`) {
		t.Fatal("the jump is not logged at error level")
	}
	// As the log says, the namespace's time went on from where it was: its
	// offset holds it near the pool's clock, not 10 minutes behind.
	if now, err := e.client.Inspector().ServerTime(context.Background()); err != nil || time.Until(now).Abs() > time.Minute {
		t.Fatalf("the namespace's time after the jump: %v (%v), want it near this clock's %v", now, err, time.Now())
	}
	// Steady again: no more jumps; then back close to the pool's clock.
	srv.SetClockOffset(0)
	for s = h.Clocked.WaitOrTimeout(); !near(s, 0); s = h.Clocked.WaitOrTimeout() {
	}
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_clock_jumps_total"); v != 1 {
		t.Fatalf("a jump forward was counted: %v", v)
	}
	if !strings.Contains(e.logs.String(), "Redis's clock is close to this pool's again") {
		t.Fatal("the offset's return is not logged")
	}
}

// beating starts a pool on rdb, with a registry of its own, whose
// heartbeat (a clock measurement, and every 12th an eviction look) comes
// every every, and returns its env, registry and test signals.
func beating(t *testing.T, rdb redis.UniversalClient, every time.Duration) (*env, *prometheus.Registry, worker.Hooks) {
	e := newEnvOn(t, rdb, redistest.Namespace(t))
	cfg := e.config()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p := e.pool(cfg)
	worker.SetClockEvery(p, every)
	h := worker.InitHooks(p, t)
	e.start(p)
	return e, reg, h
}

// A measurement is placed at its round trip's midpoint, so a Redis that
// answers slowly (CLIENT PAUSE, a long script) shifts it by up to half the
// round trip: such a measurement neither warns of an offset its round
// trip may account for, nor says a real offset is gone.
func TestSlowRedisIsNoClockOffset(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	e, _, h := beating(t, srv.Client(), 20*time.Millisecond)
	admin := srv.Client()
	slow := func() ledger.ClockSample {
		t.Helper()
		for {
			h.Clocked.WaitOrTimeout()
			if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "2500", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			// The measurement sent during the pause, unless a heartbeat
			// was in flight instead: then pause again.
			s := h.Clocked.WaitOrTimeout()
			if s.RTTMS > 2000 {
				return s
			}
		}
	}
	if s := slow(); s.Offset() <= jobs.ClockOffsetWarn {
		t.Fatalf("slow measurement %+v: want it off by more than %v, or this test checks nothing", s, jobs.ClockOffsetWarn)
	}
	h.Clocked.WaitOrTimeout()
	if strings.Contains(e.logs.String(), "Redis's clock is far from this pool's") {
		t.Fatal("a slow reply was warned about as a clock offset")
	}

	// A real offset is warned about, and a slow measurement does not end it.
	srv.SetClockOffset(-3 * time.Second)
	for s := h.Clocked.WaitOrTimeout(); s.Offset() > -2*time.Second; s = h.Clocked.WaitOrTimeout() {
	}
	if !strings.Contains(e.logs.String(), "Redis's clock is far from this pool's") {
		t.Fatal("a 3s offset is not warned about")
	}
	slow()
	h.Clocked.WaitOrTimeout()
	if strings.Contains(e.logs.String(), "Redis's clock is close to this pool's again") {
		t.Fatal("a slow measurement said the offset was gone")
	}
}
