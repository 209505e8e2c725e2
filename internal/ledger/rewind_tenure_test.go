package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRewindHiddenByLaterWritesIsDetected: enqueues acknowledged by a
// primary whose replica was cut off are lost in the failover; the new
// primary then takes more writes than were lost (a pool's claim, which
// starts its tenure, and another client's enqueues) before the client that
// saw the lost writes calls again. Its sequence is above the client's mark
// by then, but the tenure's start is below it: the loss is detected, with
// the lost writes and enqueues counted.
func TestRewindHiddenByLaterWritesIsDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	rdb := f.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	var seen rewinds
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: f.ClientOptions(), OnRewind: seen.add})
	pool := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: f.ClientOptions()})
	other := ledger.New(rdb, ledger.Config{Namespace: ns, Sentinel: f.ClientOptions()})
	insert := func(l *ledger.Ledger, n int) {
		t.Helper()
		for range n {
			var err error
			for range 5 { // the first calls after the failover may meet the old primary's connections
				if _, err = l.Insert(ctx, []*ledger.NewJob{newJob(q, "")}); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	claim := func() {
		t.Helper()
		var err error
		for range 5 {
			if _, err = pool.Claim(ctx, q, "pool", time.Minute, 1); err == nil {
				return
			}
		}
		t.Fatal(err)
	}
	insert(client, 3)
	claim() // the first tenure's epoch
	f.Sync()
	f.CutReplication()
	const lost = 4
	insert(client, lost)
	f.KillPrimary()

	claim()           // the new primary's first minting call: its tenure begins
	insert(other, 10) // more writes than were lost
	if got := seen.all(); len(got) != 0 {
		t.Fatalf("a rewind reported before the client called again: %+v", got)
	}
	insert(client, 1)
	got := seen.all()
	if len(got) != 1 {
		t.Fatalf("the client reported %d rewinds, want 1 (the loss hidden by the new primary's writes)", len(got))
	}
	if rw := got[0]; rw.LostWrites() != lost || rw.LostEnqueues != lost {
		t.Fatalf("rewind %+v: want %d writes and %d enqueues lost", rw, lost, lost)
	}
	// The tenure has a field of its own: 'hist' stays what processes of an
	// earlier version compare whole, and neither is a counter.
	statsKey := ns + ":{" + q + "}:stats"
	if h, err := rdb.HGet(ctx, statsKey, "hist").Result(); err != nil || strings.Contains(h, "/") {
		t.Fatalf("stats field hist = %q (%v), want the history alone", h, err)
	}
	if ten, err := rdb.HGet(ctx, statsKey, "tenure").Result(); err != nil || !strings.HasPrefix(ten, "1:") {
		t.Fatalf("stats field tenure = %q (%v), want the second tenure's epoch 1 first", ten, err)
	}
	st, err := client.Stats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st["tenure"]; ok {
		t.Fatalf("Stats lists the tenure as a counter: %v", st)
	}
}
