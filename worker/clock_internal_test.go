package worker

import (
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
)

// TestClockJumpSeenThroughAMeasurementMissingItsSlots: right after a
// failover to a master whose clock is 10 minutes behind, one measurement
// names the promoted master by its address (the CLUSTER SLOTS reply came
// from a node that had not yet learnt of the failover); the next names its
// slots again. The jump is counted against the slots' last sample from
// before the failover, not lost with the measurement that missed them.
func TestClockJumpSeenThroughAMeasurementMissingItsSlots(t *testing.T) {
	at := func(slots string, off time.Duration) ledger.ClockSample {
		return ledger.ClockSample{OffsetMS: float64(off) / float64(time.Millisecond), RTTMS: 1, Node: "127.0.0.1:7001", Slots: slots}
	}
	var w clockWatch
	n := 0
	for _, ss := range [][]ledger.ClockSample{
		{at("0-5460", 0), at("5461-10922", 0)},
		{at("0-5460", 0), at("127.0.0.1:7001", -10*time.Minute)}, // stale slots
		{at("0-5460", 0), at("5461-10922", -10*time.Minute)},
		{at("0-5460", 0), at("5461-10922", -10*time.Minute)},
	} {
		n += len(w.compare(ss))
	}
	if n != 1 {
		t.Fatalf("%d jumps counted, want 1", n)
	}
}
