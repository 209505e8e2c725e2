package ledger_test

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRepairDueLeavesLegitimateFarAheadEntries: the due-index repair puts
// back only entries no legitimate write makes. A retry its handler asked
// to wait two years for (jobs.RetryAfter; the retry writes no run_at) and
// a bridged job waiting for its queue's next delivery (scored at the end
// of year 9999, never due for a native claim) keep their entries, while a
// job whose entry was edited to +inf is put back (a bridged one to its
// wait for the next delivery); a native claim then takes the edited
// native job only.
func TestRepairDueLeavesLegitimateFarAheadEntries(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	due := f.l.StateKey(f.q, jobs.Pending)

	// a retry two years ahead
	later := f.enqueue()
	c := f.claimOne(later)
	if r := f.complete(c, ledger.Outcome{To: jobs.Pending, Error: "not yet", RetryIn: 2 * 365 * 24 * time.Hour}); !r.Applied || r.State != jobs.Pending {
		t.Fatalf("retry: %+v", r)
	}
	// a bridged job retried: it waits for asynq's next delivery
	dc := f.deliver("bridged", time.Minute)
	if r := f.complete(dc.Claimed, ledger.Outcome{To: jobs.Pending, Error: "boom"}); !r.Applied || r.State != jobs.Pending {
		t.Fatalf("bridged retry: %+v", r)
	}
	// entries edited by hand: a native job's, and a bridged job's (back to
	// its wait for the next delivery, out of native claims' reach)
	edited := f.enqueue()
	dc2 := f.deliver("bridged-edited", time.Minute)
	if r := f.complete(dc2.Claimed, ledger.Outcome{To: jobs.Pending, Error: "boom"}); !r.Applied {
		t.Fatalf("bridged retry: %+v", r)
	}
	wait, err := rdb.ZScore(f.ctx, due, "bridged-edited").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{edited, "bridged-edited"} {
		if err := rdb.ZAdd(f.ctx, due, redis.Z{Score: math.Inf(1), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}

	before := map[string]float64{}
	for _, id := range []string{later, "bridged"} {
		s, err := rdb.ZScore(f.ctx, due, id).Result()
		if err != nil {
			t.Fatal(err)
		}
		before[id] = s
	}
	if n, err := f.l.RepairDue(f.ctx, f.q); err != nil || n != 2 {
		t.Fatalf("put back %d, %v; want 2 (the edited entries)", n, err)
	}
	if s, err := rdb.ZScore(f.ctx, due, "bridged-edited").Result(); err != nil || s != wait {
		t.Fatalf("the edited bridged job is scored %v (%v), want its wait %v", s, err, wait)
	}
	for id, was := range before {
		if s, err := rdb.ZScore(f.ctx, due, id).Result(); err != nil || s != was {
			t.Fatalf("%s scored %v (%v), was %v: the repair moved a legitimate entry", id, s, err, was)
		}
	}
	res, err := f.l.Claim(f.ctx, f.q, "native", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].ID != edited || len(res.Dropped) != 0 {
		t.Fatalf("a native claim took %+v, dropped %+v; want the edited job only", res.Jobs, res.Dropped)
	}
}
