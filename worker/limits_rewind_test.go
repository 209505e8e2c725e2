package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestLimitAfterARewindThatLostAHolder: a concurrency limit counts the
// permits the ledger holds. A job of a key limited to 1 is enqueued and
// claimed, then the ledger loses both (a restart without persistence; a
// failover to a lagging replica loses them alike): the attempt (the
// zombie, still inside its lease by its own clock) lost its permit, so
// another job of the key is admitted while the zombie runs: two attempts
// of the key at once, as README.md ("Operating across Redis failovers")
// says. The zombie's next renewal is refused, and the lost job,
// re-submitted, waits for the live holder: the limit holds again among the
// attempts the ledger knows.
func TestLimitAfterARewindThatLostAHolder(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ns := redistest.Namespace(t)
	jc := jobs.Config{Namespace: ns}
	e := newEnvOn(t, c, ns)
	client := jobs.NewClient(c, jc)
	t.Cleanup(func() { _ = client.Close() })
	key := limitArgs{Key: "export:cust-42", Max: 1}

	lost, err := client.Enqueue(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	zl := ledger.New(c, ledger.Config{Namespace: ns, Sentinel: jc.Sentinel})
	res, err := zl.Claim(ctx, jobs.DefaultQueue, "zombie", time.Minute, 1)
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != lost.JobID {
		t.Fatalf("the zombie's claim: %+v, %v", res, err)
	}
	zombie := res.Jobs[0]
	srv.Restart()

	// After the loss: a pool works the key; its handler holds the
	// permit until released.
	started := make(chan string, 4)
	release := make(chan struct{})
	cfg := e.config()
	cfg.Jobs = jc
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[limitArgs](func(ctx context.Context, j *jobs.Job[limitArgs]) error {
		started <- j.ID
		if j.ID != lost.JobID {
			<-release
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	live, err := client.Enqueue(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if live.Deduplicated || live.JobID == lost.JobID {
		t.Fatalf("enqueue after the loss: %+v", live)
	}
	select {
	case id := <-started:
		if id != live.JobID {
			t.Fatalf("started %s, want the job enqueued after the loss %s", id, live.JobID)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the job enqueued after the loss never started: the lost permit still counts")
	}
	// Two attempts of the key now run: the zombie's lease has not ended
	// by its clock. Its next renewal finds its claim gone.
	if time.Until(zombie.Deadline) <= 0 {
		t.Fatalf("the zombie's lease already ended (%v): the test shows nothing", zombie.Deadline)
	}
	rn, err := zl.Renew(ctx, jobs.DefaultQueue, time.Minute, []ledger.Attempt{{ID: zombie.ID, Token: zombie.Token}})
	if err != nil || len(rn) != 1 || rn[0].Status != ledger.Lost {
		t.Fatalf("the zombie's renewal after the loss: %+v, %v; want lost", rn, err)
	}

	// The rewind is detected; the lost job comes back parked behind the
	// live holder, and runs once it ends, with a token above the zombie's.
	rs, err := client.Resubmit(ctx)
	if err != nil || len(rs) != 1 || rs[0].Restored != 1 {
		t.Fatalf("resubmit: %+v, %v", rs, err)
	}
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, lost.JobID, jobs.Pending)
	parked := ns + ":{" + jobs.DefaultQueue + "}:limit:" + key.Key + ":wait"
	if err := c.ZScore(ctx, parked, lost.JobID).Err(); err != nil {
		t.Fatalf("the re-submitted job is not parked on its limit (%s): %v", parked, err)
	}
	close(release)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, live.JobID, jobs.Succeeded)
	rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, lost.JobID, jobs.Succeeded)
	if rec.Token <= zombie.Token {
		t.Fatalf("the re-run's token %d is not above the zombie's %d", rec.Token, zombie.Token)
	}
}
