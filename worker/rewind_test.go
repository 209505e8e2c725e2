package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A Redis that restarts without persistence comes back empty: the pool's
// next claim finds the ledger behind what it saw, logs it at error level,
// counts it and records it; then it goes on working.
func TestPoolDetectsRewind(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	poolReg := prometheus.NewRegistry()
	cfg.Registerer = poolReg
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	h := worker.InitHooks(p, t)
	e.start(p)
	res := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)

	srv.Restart()
	// The next claims that reach the new server find the loss.
	for {
		ev := h.Claimed.WaitOrTimeout()
		if ev.Queue == jobs.DefaultQueue && metricSum(t, poolReg, "fencedq_ledger_rewinds_total") > 0 {
			break
		}
	}
	if v := metricSum(t, poolReg, "fencedq_ledger_rewinds_total"); v != 1 {
		t.Fatalf("fencedq_ledger_rewinds_total = %v, want 1", v)
	}
	if !strings.Contains(e.logs.String(), `"level":"ERROR","msg":"the ledger lost acknowledged writes`) {
		t.Fatalf("no error line about the rewind in the pool's logs")
	}
	rs, err := e.client.Inspector().Rewinds(context.Background())
	if err != nil || len(rs) != 1 || rs[0].DetectedBy != p.ID() {
		t.Fatalf("recorded rewinds: %+v, %v", rs, err)
	}
	// Work goes on.
	res = e.enqueue(echoArgs{N: 2})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
}

// metricSum adds up every series of metric name in reg.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}
