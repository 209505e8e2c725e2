package maintenance

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestDurableWorkflowCountSurvivesAFailover: in durable mode a hand-over
// pass counts a workflow started and finished only once the replica holds
// the marks it wrote. With replication cut, the pass counts nothing; the
// failover to the replica loses the marks, and the next pass writes them
// with the failed call's mark: the workflow is counted started and
// finished, and logged finished, once.
func TestDurableWorkflowCountSurvivesAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	fo := redistest.StartFailover(t, redistest.FailoverOptions{})
	ns := redistest.Namespace(t)
	f := newFixtureOn(t, fo.Client(), ns, jobs.Config{Namespace: ns, Sentinel: fo.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}) // ample on a loaded machine; the cut waits it out
	h := f.leader(f.config()).handover
	f.lostWorkflow("wf", lostStep{name: "s0", queue: "a"})
	if _, err := f.client.Cancel(f.ctx, "a", "wf.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}
	fo.Sync()

	fo.CutReplication()
	h.fullAt = time.Time{}
	_ = h.runOnce(f.ctx, 0) // settled on the primary alone
	fo.KillPrimary()
	fo.Rejoin()
	wk := f.ns + ":{a}:wf:wf"
	for try := 0; f.rdb.HExists(f.ctx, wk, "settled").Val() == false; try++ {
		if try == 50 { // the first passes may still meet the old primary's connections
			t.Fatalf("the workflow was not settled again after the failover:\n%s", f.logs.String())
		}
		h.fullAt = time.Time{}
		_ = h.runOnce(f.ctx, 0)
	}
	f.passes(h, 1)

	if got := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("a")); got != 1 {
		t.Errorf("workflows started: %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 1 {
		t.Errorf("workflows finished failed: %v, want 1", got)
	}
	if n := strings.Count(f.logs.String(), `"msg":"workflow finished"`); n != 1 {
		t.Errorf("workflow finished logged %d times, want 1", n)
	}
}
