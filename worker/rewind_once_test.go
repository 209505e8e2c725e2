package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// One loss of a queue's ledger, found by every detector of one process
// sharing one registry (the pool's claims, its maintenance leader's client
// re-submitting what it relayed, and an enqueue client), is counted once in
// fencedq_ledger_rewinds_total and listed once by Inspector.Rewinds, with
// every detection in the record.
func TestRewindCountedOncePerProcess(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	ob := &oneShotOutbox{ids: make(chan []string, 1), jobs: []jobs.Params{{Args: echoArgs{N: 0}}}}
	cfg := e.config() // the pool, its leader and e.client share e.reg
	cfg.Maintenance.Outboxes = []worker.OutboxRelay{ob}
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	worker.SetClockEvery(p, 20*time.Millisecond)
	e.start(p)
	var relayed []string
	select {
	case relayed = <-ob.ids:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the outbox was never relayed")
	}
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, relayed[0], jobs.Succeeded)
	res := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)

	srv.Restart() // every key is gone

	// The client finds the loss in its enqueue, the pool in the claim of
	// that job, the leader's client before it re-submits the relayed job.
	res = e.enqueue(echoArgs{N: 2})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, relayed[0], jobs.Succeeded)

	if v := metricSum(t, e.reg, "fencedq_ledger_rewinds_total"); v != 1 {
		t.Errorf("fencedq_ledger_rewinds_total = %v, want 1", v)
	}
	rs, err := e.client.Inspector().Rewinds(context.Background())
	if err != nil || len(rs) != 1 || rs[0].Detections < 3 {
		t.Fatalf("recorded rewinds: %+v, %v; want one record of at least 3 detections", rs, err)
	}
}
