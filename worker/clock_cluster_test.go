package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
)

// On a Redis Cluster whose masters' clocks differ (one 5 s behind the
// others), no clock jumps: a pool measuring the clock reports the masters'
// steady offsets and counts no jump backwards, whichever node a
// measurement meets, and its offset is the farthest master's.
func TestClusterMastersWithDifferentClocksAreNoJump(t *testing.T) {
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, ClockShim: true})
	cl.Nodes[1].SetClockOffset(-5 * time.Second)
	e, reg, h := beating(t, cl.Client(), 10*time.Millisecond)
	var seen []time.Duration
	var far []bool // each measurement is within half its round trip of -5s
	for range 30 {
		s := h.Clocked.WaitOrTimeout()
		seen = append(seen, s.Offset())
		far = append(far, (s.Offset()+5*time.Second).Abs() <= time.Duration(s.RTTMS/2*float64(time.Millisecond))+5*time.Millisecond)
	}
	if v := metricSum(t, reg, "fencedq_redis_clock_jumps_total"); v != 0 {
		t.Fatalf("fencedq_redis_clock_jumps_total = %v on a cluster whose clocks never moved (offsets measured %v)", v, seen)
	}
	if strings.Contains(e.logs.String(), "Redis's clock jumped backwards") {
		t.Fatalf("a jump logged on a cluster whose clocks never moved:\n%s", tail(e.logs.String(), 5))
	}
	for _, ok := range far {
		if !ok {
			t.Fatalf("offsets measured %v: want the farthest master's, -5s", seen)
		}
	}
}

// A master of a cluster fails over to a replica whose clock is 10 minutes
// behind: the jump of its slots' clock is counted once.
func TestClusterFailoverToSlowClockIsAJump(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	cl := redistest.StartClusterWith(t, redistest.ClusterOptions{Masters: 3, Replicas: true, ClockShim: true})
	cl.Replicas[1].SetClockOffset(-10 * time.Minute)
	e, reg, h := beating(t, cl.Client(), 20*time.Millisecond)
	h.Clocked.WaitOrTimeout()
	h.Clocked.WaitOrTimeout()
	cl.KillMaster(1)
	for s := h.Clocked.WaitOrTimeout(); (s.Offset() + 10*time.Minute).Abs() > time.Minute; s = h.Clocked.WaitOrTimeout() {
	}
	h.Clocked.WaitOrTimeout()
	if v := metricSum(t, reg, "fencedq_redis_clock_jumps_total"); v != 1 {
		t.Fatalf("fencedq_redis_clock_jumps_total = %v, want 1", v)
	}
	if !strings.Contains(e.logs.String(), `"node":"`+cl.Nodes[1].Addr+`"`) {
		t.Fatalf("the jump's log does not name the promoted master:\n%s", tail(e.logs.String(), 5))
	}
}
