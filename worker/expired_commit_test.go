package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestCommitAfterTheLeaseExpiredSaysSo: a handler that ignores its
// context past its deadline, until the maintenance leader found its lease
// expired and made the job uncertain, has its late success refused; the
// log says the lease expired and the job is reconciled, not that a newer
// attempt owns the job, which none does.
func TestCommitAfterTheLeaseExpiredSaysSo(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	uncertain := make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		<-uncertain // ignores its context
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(plainArgs{N: 1}, jobs.Timeout(100*time.Millisecond))
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Uncertain)
	close(uncertain)
	waitReported(hooks, 1)
	logs := e.logs.String()
	if !strings.Contains(logs, "commit rejected") {
		t.Fatal("the late commit was not logged")
	}
	if strings.Contains(logs, "a newer attempt owns the job") {
		t.Fatal("the late commit is logged as refused for a newer attempt, when the job's lease expired and no attempt ran since")
	}
	if !strings.Contains(logs, "lease expired") {
		t.Fatal("the late commit's log does not say the attempt's lease expired")
	}
}
