package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
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
	e.start(p)
	res := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)

	srv.Restart()
	// The next call that reaches the new server finds the loss: the idle
	// look shows the queue behind and the claim that follows detects it,
	// or the completer's commit, retried when the restart cut its reply.
	for end := time.Now().Add(testsignal.Timeout()); metricSum(t, poolReg, "fencedq_ledger_rewinds_total") == 0; {
		if time.Now().After(end) {
			t.Fatalf("no rewind detected within %v of the restart", testsignal.Timeout())
		}
		time.Sleep(20 * time.Millisecond)
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

// failedCommits returns fencedq_commits_failed_total of queue q and
// result in reg.
func failedCommits(t *testing.T, reg *prometheus.Registry, q, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fencedq_commits_failed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["queue"] == q && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// oneShotOutbox relays its jobs once, as an outbox deletes the rows it
// relayed: afterwards they exist only in the ledger.
type oneShotOutbox struct {
	mu   sync.Mutex
	jobs []jobs.Params
	ids  chan []string
}

func (o *oneShotOutbox) Relay(ctx context.Context, c *jobs.Client, _ lease.Token, _ int) (int, int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.jobs) == 0 {
		return 0, 0, nil
	}
	res, err := c.EnqueueMany(ctx, o.jobs)
	if err != nil {
		return 0, 0, err
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.JobID
	}
	o.jobs = nil
	o.ids <- ids
	return len(ids), 0, nil
}

func (o *oneShotOutbox) Listen(context.Context) <-chan struct{} { return nil }
func (o *oneShotOutbox) Name() string                           { return "one-shot" }

// Jobs the maintenance leader relayed from an outbox are gone from the
// outbox; when Redis then loses them, the pool re-submits them from the
// leader's record at a heartbeat.
func TestPoolResubmitsRelayedJobsLostInARewind(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	ob := &oneShotOutbox{ids: make(chan []string, 1)}
	for i := range 3 {
		ob.jobs = append(ob.jobs, jobs.Params{Args: echoArgs{N: i}, Options: []jobs.Option{jobs.Queue("relayed")}})
	}
	cfg := e.config()
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
	for _, id := range ids {
		jobstest.WaitState(t, e.ledger, "relayed", id, jobs.Pending)
	}

	srv.Restart() // every key is gone, the relayed jobs with them

	for _, id := range ids {
		jobstest.WaitState(t, e.ledger, "relayed", id, jobs.Pending)
	}
	counts, err := e.ledger.Counts(context.Background(), "relayed")
	if err != nil || counts[jobs.Pending] != int64(len(ids)) {
		t.Fatalf("relayed queue after the re-submission: %v, %v", counts, err)
	}
}
