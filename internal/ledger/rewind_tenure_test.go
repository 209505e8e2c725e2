package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
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
	retry := func(call func() error) { t.Helper(); untilRedialed(t, call) }
	insert := func(l *ledger.Ledger, n int) {
		t.Helper()
		for range n {
			retry(func() error { _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "")}); return err })
		}
	}
	claim := func() {
		t.Helper()
		retry(func() error { _, err := pool.Claim(ctx, q, "pool", time.Minute, 1); return err })
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
	// The second tenure's epoch is the promoted master's config epoch: 1,
	// or more when the Sentinel aborted a try first (a loaded machine).
	sc := redis.NewSentinelClient(&redis.Options{Addr: f.Sentinel.Addr})
	defer sc.Close()
	m, err := sc.Master(ctx, redistest.MasterName).Result()
	if err != nil || m["config-epoch"] == "" || m["config-epoch"] == "0" {
		t.Fatalf("the Sentinel's master after the failover: %v, %v", m, err)
	}
	if ten, err := rdb.HGet(ctx, statsKey, "tenure").Result(); err != nil || !strings.HasPrefix(ten, m["config-epoch"]+":") {
		t.Fatalf("stats field tenure = %q (%v), want the second tenure's epoch %s first", ten, err, m["config-epoch"])
	}
	st, err := client.Stats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st["tenure"]; ok {
		t.Fatalf("Stats lists the tenure as a counter: %v", st)
	}
}

// untilRedialed calls call until it succeeds: the first calls after a
// failover may meet the old primary's connections, and on a loaded machine
// go-redis redials through the Sentinel after more than a few tries.
func untilRedialed(t *testing.T, call func() error) {
	t.Helper()
	deadline := time.Now().Add(testsignal.Timeout())
	for {
		err := call()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // a redial's pace, not a wait for an outcome
	}
}
