package ledger_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// Storage feedback: storage refused an attempt because it holds a token
// the ledger does not know. StorageRefused records the mark; the running attempt
// still commits its outcome, and the next attempt mints exactly above the
// mark (native claims and bridged deliveries alike).
func TestRaiseAboveStorageMark(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	id := f.enqueue()
	c1 := f.claimOne(id)
	mark := c1.Token + 1_000_000_000
	if ok, err := f.l.StorageRefused(f.ctx, f.q, id, c1.Token, mark); err != nil || !ok {
		t.Fatalf("raise: %v, %v", ok, err)
	}
	if ok, err := f.l.StorageRefused(f.ctx, f.q, id, c1.Token, mark-1); err != nil || ok {
		t.Fatalf("a lower mark was recorded: %v, %v", ok, err)
	}
	// The attempt storage refused goes on and commits its retry.
	if got := f.complete(c1, ledger.Outcome{To: jobs.Pending}); !got.Applied {
		t.Fatalf("the running attempt's commit after Raise: %+v", got)
	}
	c2 := f.claimOne(id)
	if c2.Token != mark+1 {
		t.Fatalf("token after Raise %d, want the mark + 1 = %d", c2.Token, mark+1)
	}
	if f.stat("raised") != 1 || f.stat("fenced_storage") != 2 {
		t.Fatalf("raised counted %d times, fenced_storage %d (want 1 and 2)", f.stat("raised"), f.stat("fenced_storage"))
	}
	if ev := f.events(id); !contains(ev, "raised:") {
		t.Fatalf("history %v has no raised entry", ev)
	}
	// The mark is used once: the attempt after mints from its own token.
	if got := f.complete(c2, ledger.Outcome{To: jobs.Pending}); !got.Applied {
		t.Fatal(got)
	}
	if c3 := f.claimOne(id); c3.Token <= c2.Token || c3.Token > c2.Token+lease.Token(time.Hour.Microseconds()) {
		t.Fatalf("third token %d after %d", c3.Token, c2.Token)
	}

	// A bridged job's next delivery mints above its mark too.
	dc := f.deliver("b1", time.Minute)
	if got := f.complete(dc.Claimed, ledger.Outcome{To: jobs.Pending}); !got.Applied {
		t.Fatal(got)
	}
	big := lease.Token(1<<62 + 7)
	if ok, err := f.l.StorageRefused(f.ctx, f.q, "b1", dc.Claimed.Token, big); err != nil || !ok {
		t.Fatalf("raise bridged: %v, %v", ok, err)
	}
	if next := f.deliver("b1", time.Minute); next.Status != ledger.DeliveryClaimed || next.Claimed.Token != big+1 {
		t.Fatalf("delivery after Raise: %+v, want token %d", next, big+1)
	}

	if ok, err := f.l.StorageRefused(f.ctx, f.q, "no-such-job", 1, mark); err != nil || ok {
		t.Fatalf("raise of a missing job: %v, %v", ok, err)
	}
	if _, err := f.l.StorageRefused(f.ctx, f.q, id, c1.Token, math.MaxUint64); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("raise to 2^64-1: want ErrInvalid, got %v", err)
	}
}

// Every storage refusal is on record, mark or not: a zombie's write refused
// by storage (the stored token is the live attempt's, which the ledger
// knows) is counted as fenced_storage, listed with the queue's fenced
// events and in the job's history, and records no mark.
func TestStorageRefusalIsCountedAndListed(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	id := f.enqueue()
	zombie := f.claimOne(id)
	if got := f.complete(zombie, ledger.Outcome{To: jobs.Pending}); !got.Applied {
		t.Fatal(got)
	}
	live := f.claimOne(id)
	if ok, err := f.l.StorageRefused(f.ctx, f.q, id, zombie.Token, live.Token); err != nil || ok {
		t.Fatalf("a zombie's refusal below the live token recorded a mark: %v, %v", ok, err)
	}
	if ok, err := f.l.StorageRefused(f.ctx, f.q, id, zombie.Token, 0); err != nil || ok {
		t.Fatalf("a refusal without a mark: %v, %v", ok, err)
	}
	if f.stat("fenced_storage") != 2 || f.stat("raised") != 0 {
		t.Fatalf("fenced_storage %d, raised %d: want 2 and 0", f.stat("fenced_storage"), f.stat("raised"))
	}
	evs, err := f.l.Events(f.ctx, f.q, 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "fenced" && e.Stage == "storage" && e.Job == id {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("queue events: %d storage refusals listed, want 2: %+v", n, evs)
	}
	if ev := f.events(id); !contains(ev, "fenced:storage") {
		t.Fatalf("history %v has no storage refusal", ev)
	}
	if next := f.complete(live, ledger.Outcome{To: jobs.Succeeded}); !next.Applied {
		t.Fatalf("the live attempt's commit after the zombie's refusal: %+v", next)
	}
}

// Job tokens stay exact above 2^53 (fencing epochs 2 and up), where Lua
// numbers are not: consecutive attempts differ by exactly one, and the
// token checks of renew and complete hold.
func TestJobTokensExactAboveFloatRange(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	id := f.enqueue(jobs.MaxRetries(10))
	base := lease.Token(1<<62 + 12345)
	if _, err := f.l.StorageRefused(f.ctx, f.q, id, 0, base); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		c := f.claimOne(id)
		if want := base + lease.Token(i) + 1; c.Token != want {
			t.Fatalf("attempt %d: token %d, want %d", i+1, c.Token, want)
		}
		out, err := f.l.Renew(f.ctx, f.q, time.Minute, []ledger.Attempt{{ID: id, Token: c.Token + 1}, {ID: id, Token: c.Token}})
		if err != nil || out[0].Status != ledger.Lost || out[1].Status != ledger.Renewed {
			t.Fatalf("renew: %+v, %v", out, err)
		}
		if got := f.complete(c, ledger.Outcome{To: jobs.Pending}); !got.Applied || got.Current != c.Token {
			t.Fatalf("complete: %+v", got)
		}
	}
}

// Reconciler leader tokens above 2^53 are compared exactly: a leader one
// token below the highest seen is refused.
func TestLeaderTokensExactAboveFloatRange(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	high := lease.Token(1<<62 + 2)
	if err := f.l.Lead(f.ctx, f.q, high); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Lead(f.ctx, f.q, high-1); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("leader %d after %d: want ErrStale, got %v", high-1, high, err)
	}
	if _, err := f.l.Expire(f.ctx, f.q, high-1, 10); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("expire by %d after %d: want ErrStale, got %v", high-1, high, err)
	}
	if err := f.l.Lead(f.ctx, f.q, high+1); err != nil {
		t.Fatalf("a newer leader: %v", err)
	}
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "default", CatchUp: "latest"}
	if _, err := f.l.RegisterSchedule(f.ctx, high, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.RegisterSchedule(f.ctx, high-1, spec); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("schedule leader %d after %d: want ErrStale, got %v", high-1, high, err)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
