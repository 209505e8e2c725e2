package ledger_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
)

// master returns which of m masters holds slot s when the slots are split
// as redistest (and redis-cli, within a slot or two) split them: master i
// holds [i·per, (i+1)·per), the last one the rest.
func master(s, m int) int { return min(s/(16384/m), m-1) }

// TestPartitionsSpreadEvenly checks the naming rule: for the common
// partition counts, every master of a 3- and a 6-master cluster holds the
// same number of a queue's partitions (P = 3 on 6 masters: three masters,
// one each), for many queue names.
func TestPartitionsSpreadEvenly(t *testing.T) {
	names := []string{"default", "orders", "emails", "q", "a.b:c-d_e", "x123456789"}
	for _, q := range names {
		for _, c := range []struct{ p, masters, each, used int }{
			{3, 3, 1, 3}, {6, 3, 2, 3}, {12, 3, 4, 3}, {3, 6, 1, 3}, {6, 6, 1, 6}, {12, 6, 2, 6}, {24, 6, 4, 6},
		} {
			ps := ledger.PartitionNames(q, c.p)
			if len(ps) != c.p {
				t.Fatalf("%s: %d names for %d partitions", q, len(ps), c.p)
			}
			per := map[int]int{}
			seen := map[string]bool{}
			for k, n := range ps {
				if seen[n] || ledger.Logical(n) != q || !ledger.IsPartition(n) || ledger.ValidateQueueRef(n) != nil {
					t.Fatalf("%s partition %d: bad name %q", q, k, n)
				}
				seen[n] = true
				per[master(ledger.Slot(n), c.masters)]++
			}
			if len(per) != c.used {
				t.Fatalf("%s P=%d on %d masters: %d masters used (%v), want %d", q, c.p, c.masters, len(per), per, c.used)
			}
			for m, n := range per {
				if n != c.each {
					t.Fatalf("%s P=%d on %d masters: master %d holds %d partitions, want %d (%v)", q, c.p, c.masters, m, n, c.each, per)
				}
			}
		}
		if got := ledger.PartitionNames(q, 1); len(got) != 1 || got[0] != q {
			t.Fatalf("one partition of %s is %v, want the queue itself", q, got)
		}
	}
}

// TestSlotMatchesRedis pins the CRC16 to known Redis Cluster slots.
func TestSlotMatchesRedis(t *testing.T) {
	for name, slot := range map[string]int{"foo": 12182, "bar": 5061, "123456789": 12739} {
		if got := ledger.Slot(name); got != slot {
			t.Fatalf("slot of %q = %d, want %d", name, got, slot)
		}
	}
}

// TestRoutePartition checks that a key or an operation id always picks the
// same partition, the key winning, and that the spread covers them all.
func TestRoutePartition(t *testing.T) {
	if a, b := ledger.RoutePartition(6, "acct-1", "op-1", 0), ledger.RoutePartition(6, "acct-1", "op-2", 7); a != b {
		t.Fatalf("one key, two partitions: %d, %d", a, b)
	}
	if a, b := ledger.RoutePartition(6, "", "op-9", 0), ledger.RoutePartition(6, "", "op-9", 5); a != b {
		t.Fatalf("one operation id, two partitions: %d, %d", a, b)
	}
	seen := map[int]bool{}
	for n := range uint64(6) {
		seen[ledger.RoutePartition(6, "", "", n)] = true
	}
	if len(seen) != 6 {
		t.Fatalf("spread reached %d of 6 partitions", len(seen))
	}
	for _, bad := range []string{"q#", "q#x", "q#1.", "#1", "q#1.2.3", "q{x}#1"} {
		if ledger.ValidateQueueRef(bad) == nil {
			t.Fatalf("%q accepted as a partition name", bad)
		}
	}
}
