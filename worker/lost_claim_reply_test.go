package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type lostClaimArgs struct{ N int }

func (lostClaimArgs) Kind() string { return "lost_claim" }

// TestClaimWhoseReplyIsLostIsUncertain: a claim that Redis ran but whose
// reply the pool never read (the connection broke) is not sent again, and
// its job is neither lost nor run behind the ledger's back: the ledger
// holds an attempt whose outcome nobody reported, so when its lease
// expires the job is uncertain and reconciled (here, a kind without
// Reconcile: review). The pool goes on claiming.
func TestClaimWhoseReplyIsLostIsUncertain(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	e := newEnvOn(t, p.Client(nil), ns)

	lostJob := e.enqueue(lostClaimArgs{N: 1}, jobs.Queue("lostclaim"))
	cfg := e.config()
	cfg.Queues = map[string]int{"lostclaim": 1}
	pool := e.pool(cfg)
	var runs atomic.Int32
	if err := worker.Register(pool, jobs.WorkFunc[lostClaimArgs](func(_ context.Context, j *jobs.Job[lostClaimArgs]) error {
		if j.Args.N == 1 {
			runs.Add(1)
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	lost := p.DropReply("_claim\r\n", "lostclaim")
	e.start(pool)
	<-lost
	direct := ledger.New(srv.Client(), ledger.Config{Namespace: ns})
	rec := jobstest.WaitStateWithin(t, direct, lostJob.Partition, lostJob.JobID, jobs.Review, time.Minute)
	if rec.Attempts != 1 || rec.Runs != 0 || rec.UncertainSince.IsZero() {
		t.Errorf("record %+v: want one attempt, no run, uncertain since its lease expired", rec)
	}
	next := e.enqueue(lostClaimArgs{N: 2}, jobs.Queue("lostclaim"))
	jobstest.WaitStateWithin(t, direct, next.Partition, next.JobID, jobs.Succeeded, time.Minute)
	if n := runs.Load(); n != 0 {
		t.Errorf("the lost claim's job ran %d times", n)
	}
}
