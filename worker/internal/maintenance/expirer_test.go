package maintenance

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestExpirerPass: one pass moves every attempt whose lease deadline passed
// to uncertain (in batches: more than one batch's worth), leaves a live
// attempt running, drops a running entry without a record, counts, logs
// and signals each move, and fences the queue with the leader's token.
func TestExpirerPass(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	l.expirer.batch = 2
	leader := f.lead("pool-a")
	q := jobs.DefaultQueue
	var expired []string
	for range 5 {
		f.enqueue("work")
		expired = append(expired, f.claim(q, 0)) // its deadline is due at once
	}
	f.enqueue("work")
	live := f.claim(q, time.Hour)
	if err := f.rdb.ZAdd(f.ctx, f.ledger.StateKey(q, jobs.Running), redis.Z{Score: 1, Member: "ghost"}).Err(); err != nil {
		t.Fatal(err)
	}

	if err := l.expirer.runOnce(f.ctx, leader); err != nil {
		t.Fatal(err)
	}
	for _, id := range expired {
		if rec := f.get(id); rec.State != jobs.Uncertain || rec.Reason != "lease expired without commit" {
			t.Errorf("expired attempt %s: state %s, reason %q", id, rec.State, rec.Reason)
		}
		if !f.logged("lease expired without commit: job is uncertain", id) {
			t.Errorf("the move of %s was not logged", id)
		}
	}
	if rec := f.get(live); rec.State != jobs.Running {
		t.Errorf("the live attempt is %s, want running", rec.State)
	}
	if err := f.rdb.ZScore(f.ctx, f.ledger.StateKey(q, jobs.Running), "ghost").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the running entry without a record is still indexed: %v", err)
	}
	if v := testutil.ToFloat64(f.metrics.Expired.WithLabelValues(q)); v != 5 {
		t.Errorf("fencedq_attempts_expired_total %v, want 5", v)
	}
	if n := l.expirer.tally.expired.Load(); n != 5 {
		t.Errorf("tally %d, want 5", n)
	}
	signalled := map[string]bool{}
	for _, d := range f.decided.WaitOrTimeoutN(5) {
		if d.Result != ResultExpired {
			t.Errorf("decision %+v, want %s", d, ResultExpired)
		}
		signalled[d.JobID] = true
	}
	for _, id := range expired {
		if !signalled[id] {
			t.Errorf("no decision signalled for %s", id)
		}
	}
	// The queue is fenced by the pass: an older leader token is refused.
	if err := f.ledger.Lead(f.ctx, q, leader-1); !errors.Is(err, jobs.ErrStale) {
		t.Errorf("an older leader token after the pass: %v, want jobs.ErrStale", err)
	}
	if err := l.expirer.runOnce(f.ctx, leader-1); !errors.Is(err, jobs.ErrStale) {
		t.Errorf("a pass under an older leader token: %v, want jobs.ErrStale", err)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceExpirer)); v != 0 {
		t.Errorf("a stale pass is not a queue failure: expirer errors %v", v)
	}
}

// TestExpirerWakesAtTheEarliestDeadline: after a pass, the expirer wakes
// itself at the earliest running deadline when that comes before its next
// interval (an hour here), and the pass it then runs finds the attempt.
func TestExpirerWakesAtTheEarliestDeadline(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	f.enqueue("work")
	id := f.claim(jobs.DefaultQueue, 200*time.Millisecond)
	for {
		if err := l.expirer.runOnce(f.ctx, leader); err != nil {
			t.Fatal(err)
		}
		if f.get(id).State == jobs.Uncertain {
			break
		}
		// Still running: the pass scheduled a wake-up at its deadline.
		select {
		case <-l.expirer.wake:
		case <-time.After(testsignal.Timeout()):
			t.Fatal("the expirer did not wake itself at the attempt's deadline")
		}
	}
	if d := f.decided.WaitOrTimeout(); d.JobID != id || d.Result != ResultExpired {
		t.Fatalf("decision %+v", d)
	}
}

// TestExpirerQueueFailureIsCounted: a queue whose running index is broken
// fails its part of the pass; it is logged and counted, and the other
// queues are still expired.
func TestExpirerQueueFailureIsCounted(t *testing.T) {
	f := newFixture(t)
	l := f.leader(f.config())
	leader := f.lead("pool-a")
	f.enqueue("work", jobs.Queue("broken"))
	id := f.enqueue("work")
	f.claim(jobs.DefaultQueue, 0)
	if err := f.rdb.Set(f.ctx, f.ledger.StateKey("broken", jobs.Running), "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.expirer.runOnce(f.ctx, leader); err != nil {
		t.Fatalf("one broken queue failed the pass: %v", err)
	}
	if st := f.get(id).State; st != jobs.Uncertain {
		t.Fatalf("the healthy queue's expired attempt is %s", st)
	}
	if v := testutil.ToFloat64(f.metrics.MaintenanceErrors.WithLabelValues(metrics.ServiceExpirer)); v != 1 {
		t.Fatalf("expirer errors %v, want 1", v)
	}
	if !f.logged("maintenance pass failed on one queue", `"service":"expirer"`, `"queue":"broken"`) {
		t.Fatal("the broken queue's failure was not logged with its service and queue")
	}
}
