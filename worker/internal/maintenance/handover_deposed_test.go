package maintenance

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/metrics"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestWorkflowCountOwedByADeposedLeaderIsCounted: a leader whose pass
// settled a workflow (the server wrote its outcome with the pass's mark)
// but lost the reply, and whose leadership then ended before a pass of
// its own read the mark back, still counts the workflow finished, and
// logs it, once: the next leader finds the outcome written with another
// leader's mark and counts nothing, so the deposed one settles what it
// owes when its leadership ends.
func TestWorkflowCountOwedByADeposedLeaderIsCounted(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	// no re-send: the lost reply stays lost for the pass (as when the
	// leadership's context ends while the call waits for it)
	f := newFixtureOn(t, p.Client(&redis.Options{MaxRetries: -1}), ns, jobs.Config{Namespace: ns})
	f.lostWorkflow("wf", lostStep{name: "s0", queue: "a"})
	if _, err := f.client.Cancel(f.ctx, "a", "wf.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}

	a := f.leader(f.config())
	ctx, depose := context.WithCancel(f.ctx)
	served := make(chan struct{})
	lost := p.DropReply("hsetnx", "settled")
	go func() {
		defer close(served)
		a.serve(ctx, f.lead("pool-a"))
	}()
	<-lost
	depose()
	<-served

	cfg := f.config()
	cfg.WorkerID = "pool-b"
	cfg.Metrics = metrics.New(prometheus.NewRegistry())
	b := f.leader(cfg)
	f.passes(b.handover, 2)

	finished := func(m *metrics.Set) float64 {
		return testutil.ToFloat64(m.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed))
	}
	if got := finished(f.metrics) + finished(cfg.Metrics); got != 1 {
		t.Errorf("workflows finished failed: %v by the deposed leader, %v by the next, want 1 in all",
			finished(f.metrics), finished(cfg.Metrics))
	}
	started := func(m *metrics.Set) float64 { return testutil.ToFloat64(m.WorkflowsStarted.WithLabelValues("a")) }
	if got := started(f.metrics) + started(cfg.Metrics); got != 1 {
		t.Errorf("workflows started: %v in all, want 1", got)
	}
	if n := strings.Count(f.logs.String(), `"msg":"workflow finished"`); n != 1 {
		t.Errorf("workflow finished logged %d times, want 1:\n%s", n, f.logs.String())
	}
}
