package ledger_test

import (
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestFirstDue: the idle look reports, per queue, 0 for a due job, the wait
// for a delayed one (by Redis's clock), -1 for an empty queue, a due job of
// a paused queue as due, and writes nothing (the idle flag a claim set
// stays, so the next enqueue still wakes pools).
func TestFirstDue(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	f.enqueue(jobs.Queue("due"))
	f.enqueue(jobs.Queue("later"), jobs.Delay(time.Hour))
	f.enqueue(jobs.Queue("paused"))
	if _, err := f.c.Pause(f.ctx, "paused", "ada", ""); err != nil {
		t.Fatal(err)
	}
	if res, err := f.l.Claim(f.ctx, "empty", "w1", time.Minute, 10); err != nil || len(res.Jobs) != 0 {
		t.Fatal(res, err)
	}
	before, err := rdb.DBSize(f.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.l.FirstDue(f.ctx, []string{"due", "later", "empty", "paused"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[2] != -1 || got[3] != 0 {
		t.Fatalf("first due %v, want [0 ~1h -1 0]", got)
	}
	if got[1] < 59*time.Minute || got[1] > time.Hour {
		t.Fatalf("the delayed job is due in %v, want about an hour", got[1])
	}
	if after, _ := rdb.DBSize(f.ctx).Result(); after != before {
		t.Fatalf("the look changed the key count: %d → %d", before, after)
	}
	if got, err := f.l.FirstDue(f.ctx, nil); err != nil || got != nil {
		t.Fatal(got, err)
	}
	// The claim on the empty queue left its idle flag: an enqueue wakes.
	sub := rdb.Subscribe(f.ctx, f.l.NotifyChannel("empty"))
	defer sub.Close()
	if _, err := sub.Receive(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.enqueue(jobs.Queue("empty"))
	select {
	case m := <-sub.Channel():
		if m.Channel != f.l.NotifyChannel("empty") {
			t.Fatalf("wake-up on %s", m.Channel)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the look")
	}
}

// TestFirstDeadline: the expirer's look reports 0 for a queue with a passed
// lease deadline or without the leader's token recorded, the wait for a
// live attempt, -1 for a queue with nothing running, and 0 for a queue
// whose index cannot be read (its Expire call then reports the error).
func TestFirstDeadline(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	const leader = 7
	f.enqueue(jobs.Queue("expired"))
	f.enqueue(jobs.Queue("live"))
	if _, err := f.l.Claim(f.ctx, "expired", "w1", 0, 1); err != nil { // its deadline is now
		t.Fatal(err)
	}
	if _, err := f.l.Claim(f.ctx, "live", "w1", time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	qs := []string{"expired", "live", "idle", "unled", "broken"}
	for _, q := range qs[:4] {
		if q == "unled" {
			continue
		}
		if err := f.l.Lead(f.ctx, q, leader); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.l.Lead(f.ctx, "broken", leader); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(f.ctx, f.l.StateKey("broken", jobs.Running), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := f.l.FirstDeadline(f.ctx, qs, leader)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[1] < 59*time.Minute || got[2] != -1 || got[3] != 0 || got[4] != 0 {
		t.Fatalf("first deadlines %v, want [0 ~1h -1 0 0]", got)
	}
}
