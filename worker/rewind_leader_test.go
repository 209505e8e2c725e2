package worker_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// The maintenance leader's own client (periodic ticks, relayed outbox
// rows) detects a rewind of a queue the pool does not work and re-submits
// the relayed jobs lost in it: both are counted in the pool's metrics
// (fencedq_ledger_rewinds_total, fencedq_jobs_resubmitted_total), as any
// client's are, not in a registry nobody scrapes.
func TestLeaderClientRewindsAndResubmissionsAreCounted(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	ob := &oneShotOutbox{ids: make(chan []string, 1)}
	for i := range 3 {
		ob.jobs = append(ob.jobs, jobs.Params{Args: echoArgs{N: i}, Options: []jobs.Option{jobs.Queue("relayed")}})
	}
	cfg := e.config()
	poolReg := prometheus.NewRegistry()
	cfg.Registerer = poolReg
	cfg.Maintenance.Outboxes = []worker.OutboxRelay{ob}
	p := e.pool(cfg) // works "default" only: the relayed jobs stay pending
	worker.SetClockEvery(p, 20*time.Millisecond)
	e.start(p)
	var ids []string
	select {
	case ids = <-ob.ids:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the outbox was never relayed")
	}
	srv.Restart() // every key is gone, the relayed jobs with them
	for _, id := range ids {
		jobstest.WaitState(t, e.ledger, "relayed", id, jobs.Pending)
	}
	// The counter is added once Resubmit returns, after the jobs exist.
	for end := time.Now().Add(testsignal.Timeout()); metricSum(t, poolReg, "fencedq_jobs_resubmitted_total") < float64(len(ids)) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if v := metricSum(t, poolReg, "fencedq_jobs_resubmitted_total"); v != float64(len(ids)) {
		t.Errorf("fencedq_jobs_resubmitted_total = %v, want %d", v, len(ids))
	}
	if v := metricSum(t, poolReg, "fencedq_ledger_rewinds_total"); v < 1 {
		t.Errorf("fencedq_ledger_rewinds_total = %v, want the relayed queue's rewind counted", v)
	}
}
