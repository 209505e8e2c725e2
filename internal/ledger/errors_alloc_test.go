package ledger

import "testing"

// TestReplyChecksOfASuccessAllocateNothing: every enqueue call's reply goes
// through refusedWrite and foreignQueueKey; a success (no error) costs
// them no allocation.
func TestReplyChecksOfASuccessAllocateNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if refusedWrite(nil) != nil || foreignQueueKey(nil) != nil {
			t.Fatal("an error from no error")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per success, want 0", n)
	}
}
