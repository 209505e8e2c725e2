package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestIdleQueuesCostNoClaims: a pool over 1 000 queues starts with one look
// at every queue and claims only those with due jobs (before, it claimed each
// queue in turn, seconds over thousands of queues before its first job);
// while nothing is enqueued it claims none again across several idle looks
// (one plain read per queue per poll interval), except a paused queue with a
// due job, which each look finds and claims once. A job enqueued into one
// queue wakes the pool and is claimed from that queue alone; a delayed job is
// claimed when it becomes due.
func TestIdleQueuesCostNoClaims(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.FetchPollInterval = 100 * time.Millisecond
	cfg.Maintenance.Disabled = true
	cfg.Queues = map[string]int{}
	const n = 1000
	for i := range n {
		cfg.Queues[fmt.Sprintf("q%04d", i)] = 1 + i%3
	}
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	ran := make(chan string, 10)
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error {
		ran <- j.Queue
		return nil
	}))
	ctx := context.Background()
	// A paused queue with a due job: every idle look shows it due.
	e.enqueue(orderArgs{Q: "q0001"}, jobs.Queue("q0001"))
	if changed, err := e.client.Pause(ctx, "q0001", "ada", "hold"); !changed || err != nil {
		t.Fatal(changed, err)
	}
	// A due job in another queue, waiting when the pool starts.
	waiting := e.enqueue(orderArgs{Q: "q0500"}, jobs.Queue("q0500"))
	e.start(p)
	if l := hooks.Looked.WaitOrTimeout(); l != n {
		t.Fatalf("the first look read %d queues, want %d", l, n)
	}
	if q := <-ran; q != "q0500" {
		t.Fatalf("ran a job of %s", q)
	}
	jobstest.WaitState(t, e.ledger, "q0500", waiting.JobID, jobs.Succeeded)
	// Looks that started after the first claims: each reads the queues
	// not due (all of them) and makes only the paused one due.
	hooks.Looked.Drain()
	hooks.Looked.WaitOrTimeout()
	looks := hooks.Looked.WaitOrTimeoutN(3)
	for _, l := range looks {
		if l < n-1 {
			t.Fatalf("an idle look read %d queues, want at least %d", l, n-1)
		}
	}
	// Every claim since the start: the queue with the waiting job, and the
	// paused queue once per look; no other queue.
	var claims []worker.ClaimEvent
	for _, ev := range hooks.Claimed.Drain() {
		switch {
		case ev.Queue == "q0500":
		case ev.Queue == "q0001" && ev.Result.Paused:
			claims = append(claims, ev)
		default:
			t.Fatalf("the pool claimed queue %s, which had no due job: %+v", ev.Queue, ev.Result)
		}
	}
	if len(claims) < 2 || len(claims) > len(looks)+4 {
		t.Fatalf("%d claims of the paused queue over %d idle looks, want one per look", len(claims), len(looks)+1)
	}

	// A job in one queue: the wake-up makes that queue, and no other, due.
	hooks.Claimed.Drain()
	res := e.enqueue(orderArgs{Q: "q0537"}, jobs.Queue("q0537"))
	ev := hooks.Claimed.WaitFor("the claim of the woken queue", func(ev worker.ClaimEvent) bool { return ev.Queue != "q0001" })
	if ev.Queue != "q0537" || len(ev.Result.Jobs) != 1 || ev.Result.Jobs[0].ID != res.JobID {
		t.Fatalf("the woken claim: queue %s, %+v", ev.Queue, ev.Result)
	}
	if q := <-ran; q != "q0537" {
		t.Fatalf("ran a job of %s", q)
	}

	// A delayed job: the wake-up's claim learns when it is due, and the
	// pool claims it then (its next claim of the queue).
	// (On a slow machine the woken claim may come after the delay and
	// claim it at once.)
	hooks.Claimed.Drain()
	delayed := e.enqueue(orderArgs{Q: "q0999"}, jobs.Queue("q0999"), jobs.Delay(300*time.Millisecond))
	for tries := 1; ; tries++ {
		ev := hooks.Claimed.WaitFor("a claim of the delayed job's queue", func(ev worker.ClaimEvent) bool { return ev.Queue == "q0999" })
		if len(ev.Result.Jobs) == 1 && ev.Result.Jobs[0].ID == delayed.JobID {
			break
		}
		if tries == 2 || len(ev.Result.Jobs) != 0 || ev.Result.DueIn <= 0 {
			t.Fatalf("claim %d of the delayed job's queue: %+v", tries, ev.Result)
		}
	}
	jobstest.WaitState(t, e.ledger, "q0999", delayed.JobID, jobs.Succeeded)
}

// TestStartingPoolMissesNoWakeUp: a pool over 5 000 queues, none claimed
// yet, runs a job enqueued into any of them right after it starts, by its
// wake-up alone (the idle look is an hour away): the first look arms every
// queue's wake-ups after the subscription is confirmed (a queue no claim
// has armed sends none).
func TestStartingPoolMissesNoWakeUp(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.FetchPollInterval = time.Hour
	cfg.Maintenance.Disabled = true
	cfg.Queues = map[string]int{}
	const n = 5000
	for i := range n {
		cfg.Queues[fmt.Sprintf("q%04d", i)] = 1
	}
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	_ = worker.Register(p, jobs.WorkFunc[orderArgs](func(ctx context.Context, j *jobs.Job[orderArgs]) error { return nil }))
	e.start(p)
	if l := hooks.Looked.WaitOrTimeout(); l != n {
		t.Fatalf("the first look read %d queues, want %d", l, n)
	}
	for _, q := range []string{"q4999", "q0000", "q2718"} {
		res := e.enqueue(orderArgs{Q: q}, jobs.Queue(q))
		jobstest.WaitState(t, e.ledger, q, res.JobID, jobs.Succeeded)
	}
	for _, ev := range hooks.Claimed.Drain() {
		if ev.Queue != "q4999" && ev.Queue != "q0000" && ev.Queue != "q2718" {
			t.Fatalf("the pool claimed queue %s, which had no job", ev.Queue)
		}
	}
}
