package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type servedArgs struct {
	N int `json:"n"`
}

func (servedArgs) Kind() string { return "served-elsewhere" }

// A pool that has no worker for a kind another live pool of the queue runs
// keeps putting its jobs back past UnknownKindDefers: the job waits for the
// pool that runs it, busy for now, instead of going dead as "unknown kind".
func TestUnknownKindServedByAnotherLivePoolIsNotKilled(t *testing.T) {
	e := newEnv(t)
	started := make(chan int, 2)
	release := make(chan struct{})
	cfgA := e.config()
	cfgA.Concurrency = 1
	a := e.pool(cfgA)
	if err := worker.Register(a, jobs.WorkFunc[servedArgs](func(ctx context.Context, j *jobs.Job[servedArgs]) error {
		started <- j.Args.N
		if j.Args.N == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(a)
	busy := e.enqueue(servedArgs{N: 1})
	<-started // pool A's one slot is taken

	cfgB := e.config()
	cfgB.UnknownKindDefers = 1 // one put-back, then dead unless a live pool runs the kind
	stopB := e.start(e.pool(cfgB))
	waiting := e.enqueue(servedArgs{N: 2})

	// Pool B claims the job again and again while A is busy: past its put-back
	// limit, the job must still be pending, put back for A.
	ctx := context.Background()
	var rec *jobs.Record
	err := redistest.Wait(e.rdb, e.ledger.JobKey("default", waiting.JobID), testsignal.DefaultTimeout, func() bool {
		rec, _ = e.ledger.Get(ctx, "default", waiting.JobID)
		return rec != nil && (rec.State == jobs.Dead || rec.KindDefers >= 2)
	})
	if err != nil {
		t.Fatalf("pool B did not put the job back twice: %v", err)
	}
	if rec.State == jobs.Dead {
		t.Fatalf("a job of a kind a live pool of its queue runs went dead: reason %q, put back %d times", rec.Reason, rec.KindDefers)
	}
	// B stops, so A (not B, racing it at each due time) claims the job when
	// its put-back delay (doubling, up to 30 s) runs out.
	stopB()
	close(release)
	jobstest.WaitState(t, e.ledger, "default", busy.JobID, jobs.Succeeded)
	rec = jobstest.WaitStateWithin(t, e.ledger, "default", waiting.JobID, jobs.Succeeded, time.Minute)
	if rec.Attempts != 1 {
		t.Fatalf("%d attempts: the put-backs consumed attempts", rec.Attempts)
	}
}

type unknownResourceArgs struct {
	Account string `json:"account"`
}

func (unknownResourceArgs) Kind() string { return "resource-kind-elsewhere" }

func (a unknownResourceArgs) Resource() string { return "account:" + a.Account }

// A pool with no worker for a job's kind puts it back as an unknown kind
// without taking (or waiting for) the job's resource lease: it would only
// keep the resource from the pools that run the kind.
func TestUnknownKindPutBackTakesNoResourceLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := lease.NewManager(e.rdb, lease.Config{Namespace: e.ns})
	held, err := m.Acquire(ctx, "account:9", "another-pool", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Release(ctx, held) }()
	cfg := e.config()
	cfg.LeaseWait = time.Minute // a pool waiting for the resource would wait past the bound below
	e.start(e.pool(cfg))
	res := e.enqueue(unknownResourceArgs{Account: "9"})
	var rec *jobs.Record
	err = redistest.Wait(e.rdb, e.ledger.JobKey("default", res.JobID), testsignal.DefaultTimeout, func() bool {
		rec, _ = e.ledger.Get(ctx, "default", res.JobID)
		return rec != nil && rec.KindDefers >= 1
	})
	if err != nil {
		t.Fatalf("the job was not put back as an unknown kind: %v (state %s, reason %q)", err, rec.State, rec.Reason)
	}
	if rec.Attempts != 0 {
		t.Fatalf("%d attempts: the put-back consumed one", rec.Attempts)
	}
}

type rerunUnknownArgs struct{}

func (rerunUnknownArgs) Kind() string { return "rerun-unknown-kind" }

// An operator's re-run of a job that went dead as "unknown kind" gives it a
// fresh allowance of put-backs: a pool still without the kind puts it back
// again for another pool instead of killing it at its first claim.
func TestRerunOfAnUnknownKindJobPutsItBackAgain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.UnknownKindDefers = 1
	e.start(e.pool(cfg))
	res := e.enqueue(rerunUnknownArgs{})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Dead)

	ctx := context.Background()
	if _, err := e.client.Resolve(ctx, "default", res.JobID, jobs.DecideRerun, "ada", "the kind is deployed now"); err != nil {
		t.Fatal(err)
	}
	// Put back (pending with the put-back's reason; a re-run clears it) or dead.
	var got *jobs.Record
	err := redistest.Wait(e.rdb, e.ledger.JobKey("default", res.JobID), testsignal.DefaultTimeout, func() bool {
		got, _ = e.ledger.Get(ctx, "default", res.JobID)
		return got != nil && got.Runs == 1 && (got.State == jobs.Dead || got.State == jobs.Pending && got.Reason != "")
	})
	if err != nil {
		t.Fatalf("the re-run job was neither put back nor killed: %v", err)
	}
	if got.State != jobs.Pending || got.KindDefers != 1 {
		t.Fatalf("re-run job: %s (reason %q), put back %d times since its re-run; want pending, put back once", got.State, got.Reason, got.KindDefers)
	}
}
