package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

func (f *fixture) deliver(id string, ttl time.Duration) *ledger.DeliveryClaim {
	f.t.Helper()
	dc, err := f.l.ClaimDelivery(f.ctx, f.q, ledger.Delivery{
		ID: id, Kind: "email:send", Payload: []byte(`{"to":"a"}`), MaxRetries: 3,
		Owner: "asynq-1", TTL: ttl, Bridge: "asynq",
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return dc
}

// nativeClaimsNothing checks that a native pool's claim never takes a
// bridged job.
func (f *fixture) nativeClaimsNothing() {
	f.t.Helper()
	res, err := f.l.Claim(f.ctx, f.q, "native", time.Minute, 10)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(res.Jobs) != 0 || len(res.Dropped) != 0 {
		f.t.Fatalf("a native claim found %+v / dropped %+v: bridged jobs must stay out of the due index", res.Jobs, res.Dropped)
	}
}

func TestBridgedDeliveries(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()

	t.Run("first sight creates a running bridged job; success; a redelivery is a duplicate", func(t *testing.T) {
		f := newFixture(t, rdb)
		dc := f.deliver("t1", time.Minute)
		if dc.Status != ledger.DeliveryClaimed || !dc.Created || dc.Claimed.Attempt != 1 || dc.Claimed.Token == 0 {
			t.Fatalf("first delivery: %+v", dc)
		}
		rec := f.want("t1", jobs.Running)
		if rec.Bridge != "asynq" || rec.Kind != "email:send" || rec.OperationID != "t1" || string(rec.Payload) != `{"to":"a"}` {
			t.Fatalf("record %+v", rec)
		}
		if string(rec.Args) != "null" {
			t.Fatalf("args %s: a bridged payload is never shown", rec.Args)
		}
		f.nativeClaimsNothing()
		if c := f.complete(dc.Claimed, ledger.Outcome{To: jobs.Succeeded}); !c.Applied {
			t.Fatalf("complete: %+v", c)
		}
		f.want("t1", jobs.Succeeded)
		again := f.deliver("t1", time.Minute)
		if again.Status != ledger.DeliveryFinal || again.State != jobs.Succeeded {
			t.Fatalf("redelivery: %+v", again)
		}
		if n := f.stat("deduplicated_execute"); n != 1 {
			t.Fatalf("deduplicated_execute %d", n)
		}
	})

	t.Run("a retry waits outside the due index for the next delivery", func(t *testing.T) {
		f := newFixture(t, rdb)
		dc := f.deliver("t2", time.Minute)
		if c := f.complete(dc.Claimed, ledger.Outcome{To: jobs.Pending, Error: "boom", RetryIn: 0}); !c.Applied || c.State != jobs.Pending {
			t.Fatalf("retry: %+v", c)
		}
		rec, err := f.l.Get(f.ctx, f.q, "t2")
		if err != nil || rec.State != jobs.Pending {
			t.Fatalf("after a retry: %+v, %v", rec, err)
		}
		f.nativeClaimsNothing()
		next := f.deliver("t2", time.Minute)
		if next.Status != ledger.DeliveryClaimed || next.Created || next.Claimed.Attempt != 2 || next.Claimed.Token <= dc.Claimed.Token {
			t.Fatalf("second delivery: %+v (first token %d)", next, dc.Claimed.Token)
		}
		f.want("t2", jobs.Running)
	})

	t.Run("a live lease elsewhere is busy; an expired one is made uncertain and a re-run stays bridged", func(t *testing.T) {
		f := newFixture(t, rdb)
		f.deliver("t3", time.Minute)
		busy := f.deliver("t3", time.Minute)
		if busy.Status != ledger.DeliveryBusy || busy.Owner != "asynq-1" || busy.Deadline.IsZero() {
			t.Fatalf("second delivery under a live lease: %+v", busy)
		}
		g := newFixture(t, rdb) // a job whose lease expires at once
		short := g.deliver("t4", time.Millisecond)
		un := g.deliver("t4", time.Minute)
		for un.Status == ledger.DeliveryBusy { // until the 1 ms lease passed by the Redis clock
			un = g.deliver("t4", time.Minute)
		}
		if un.Status != ledger.DeliveryUnresolved || un.State != jobs.Uncertain {
			t.Fatalf("delivery after an expired lease: %+v", un)
		}
		g.want("t4", jobs.Uncertain)
		if again := g.deliver("t4", time.Minute); again.Status != ledger.DeliveryUnresolved {
			t.Fatalf("delivery of an uncertain job: %+v", again)
		}
		if _, err := g.l.Decide(g.ctx, g.q, "t4", ledger.Resolution{Decision: jobs.DecideRerun, Actor: "operator:test"}); err != nil {
			t.Fatal(err)
		}
		g.want("t4", jobs.Pending) // listed and counted as pending while it waits for asynq
		g.nativeClaimsNothing()
		rerun := g.deliver("t4", time.Minute)
		if rerun.Status != ledger.DeliveryClaimed || rerun.Claimed.Token <= short.Claimed.Token {
			t.Fatalf("delivery after a re-run: %+v", rerun)
		}
		// The stale attempt's commit is refused.
		if c := g.complete(short.Claimed, ledger.Outcome{To: jobs.Succeeded}); c.Applied {
			t.Fatalf("stale commit applied: %+v", c)
		}
	})

	t.Run("a native job with the same id is not taken over", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		dc := f.deliver(id, time.Minute)
		if dc.Status != ledger.DeliveryConflict {
			t.Fatalf("delivery over a native job: %+v", dc)
		}
		f.claimOne(id)
	})

	t.Run("a paused queue claims nothing", func(t *testing.T) {
		f := newFixture(t, rdb)
		if _, err := f.l.SetPaused(f.ctx, f.q, true, "operator:test", ""); err != nil {
			t.Fatal(err)
		}
		if dc := f.deliver("t5", time.Minute); dc.Status != ledger.DeliveryPaused {
			t.Fatalf("delivery to a paused queue: %+v", dc)
		}
		// Recorded on first sight, pending for its task, never attempted.
		if rec := f.want("t5", jobs.Pending); rec.Attempts != 0 || rec.Bridge != "asynq" {
			t.Fatalf("job seen by a paused queue: %+v", rec)
		}
		if dc := f.deliver("t5", time.Minute); dc.Status != ledger.DeliveryPaused {
			t.Fatalf("second delivery to a paused queue: %+v", dc)
		}
		if _, err := f.l.SetPaused(f.ctx, f.q, false, "operator:test", ""); err != nil {
			t.Fatal(err)
		}
		f.nativeClaimsNothing()
		if dc := f.deliver("t5", time.Minute); dc.Status != ledger.DeliveryClaimed || dc.Claimed.Attempt != 1 {
			t.Fatalf("delivery after the resume: %+v", dc)
		}
		f.want("t5", jobs.Running)
		if n := f.stat("enqueued"); n != 1 {
			t.Fatalf("enqueued %d times, want once", n)
		}
	})

	t.Run("invalid deliveries are rejected", func(t *testing.T) {
		f := newFixture(t, rdb)
		_, err := f.l.ClaimDelivery(f.ctx, f.q, ledger.Delivery{ID: "x", Kind: "k", Owner: "o", Bridge: "asynq"})
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("no ttl: %v", err)
		}
	})
}

// TestUndeliveredAndRedeliver: a claim records the delivering task; a
// bridged job waiting for a delivery is listed with it; a redelivery is
// recorded once per state and token seen, never for a live lease or a
// finished job.
func TestUndeliveredAndRedeliver(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	dc, err := f.l.ClaimDelivery(f.ctx, f.q, ledger.Delivery{
		ID: "b1", Kind: "email:send", Payload: []byte(`{"to":"a"}`), MaxRetries: 3,
		Owner: "asynq-1", TTL: time.Minute, Bridge: "asynq", TaskQueue: "mail", TaskID: "task-1",
	})
	if err != nil || dc.Status != ledger.DeliveryClaimed {
		t.Fatalf("claim: %+v, %v", dc, err)
	}
	f.claimOne(f.enqueue()) // a native running job: never listed
	us, _, err := f.l.Undelivered(f.ctx, f.q, 0, 10)
	if err != nil || len(us) != 1 {
		t.Fatalf("undelivered: %+v, %v; want the bridged job only", us, err)
	}
	u := us[0]
	if u.ID != "b1" || u.State != jobs.Running || u.Token != dc.Claimed.Token || u.TaskQueue != "mail" || u.TaskID != "task-1" ||
		u.Kind != "email:send" || string(u.Payload) != `{"to":"a"}` || u.MaxRetries != 3 || u.Bridge != "asynq" {
		t.Fatalf("undelivered job %+v", u)
	}
	if _, ok, err := f.l.Redeliver(f.ctx, f.q, u, "mail", "b1"); err != nil || ok {
		t.Fatalf("redeliver under a live lease: %v, %v; want nothing recorded", ok, err)
	}
	if c := f.complete(dc.Claimed, ledger.Outcome{To: jobs.Pending, Error: "boom"}); !c.Applied {
		t.Fatalf("retry: %+v", c)
	}
	us, _, err = f.l.Undelivered(f.ctx, f.q, 0, 10)
	if err != nil || len(us) != 1 || us[0].State != jobs.Pending {
		t.Fatalf("undelivered after a retry: %+v, %v", us, err)
	}
	if _, ok, err := f.l.Redeliver(f.ctx, f.q, u, "mail", "b1"); err != nil || ok {
		t.Fatalf("redeliver of a state no longer seen: %v, %v; want nothing recorded", ok, err)
	}
	task, ok, err := f.l.Redeliver(f.ctx, f.q, us[0], "mail", "b1")
	if err != nil || !ok || task != "b1~1" {
		t.Fatalf("redeliver: %q, %v, %v; want task b1~1", task, ok, err)
	}
	if _, ok, err := f.l.Redeliver(f.ctx, f.q, us[0], "mail", "b1"); err != nil || ok {
		t.Fatalf("a second caller that saw the same job: %v, %v; want nothing recorded", ok, err)
	}
	us, _, _ = f.l.Undelivered(f.ctx, f.q, 0, 10)
	if len(us) != 1 || us[0].TaskID != "b1~1" {
		t.Fatalf("undelivered after a redelivery: %+v; want the job's task b1~1", us)
	}
	if task, ok, _ := f.l.Redeliver(f.ctx, f.q, us[0], "mail", "b1"); !ok || task != "b1~2" {
		t.Fatalf("redelivery of a job whose new task is gone too: %q, %v; want task b1~2", task, ok)
	}
	if n := f.stat("redelivered"); n != 2 {
		t.Fatalf("redelivered counted %d times", n)
	}
}
