package maintenance

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// lossyFixture is a fixture whose ledger and clients talk to Redis through
// a proxy that can lose replies (go-redis's default options: it re-sends
// a command whose reply it did not get).
func lossyFixture(t *testing.T) (*fixture, *redistest.Proxy) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	return newFixtureOn(t, p.Client(nil), ns, jobs.Config{Namespace: ns}), p
}

// passes runs n hand-over passes, each reading every open workflow.
func (f *fixture) passes(h *handover, n int) {
	f.t.Helper()
	for range n {
		h.fullAt = h.fullAt.AddDate(-1, 0, 0)
		if err := h.runOnce(f.ctx, 0); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestWorkflowCountedOnceWhenTheSettleReplyIsLost: the hand-over pass
// whose write of a workflow's "started" mark, or of its outcome, lost its
// reply (the server wrote it) still counts the workflow started and
// finished, and logs it finished, once: the mark read back on the re-sent
// or next call is the pass's own, not another leader's.
func TestWorkflowCountedOnceWhenTheSettleReplyIsLost(t *testing.T) {
	f, p := lossyFixture(t)
	h := f.leader(f.config()).handover
	f.lostWorkflow("wf", lostStep{name: "s0", queue: "a"})

	lost := p.DropReply("hsetnx", "seen")
	f.passes(h, 1)
	<-lost
	f.passes(h, 2)
	if got := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("a")); got != 1 {
		t.Errorf("workflows started: %v, want 1", got)
	}

	if _, err := f.client.Cancel(f.ctx, "a", "wf.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}
	lost = p.DropReply("wf_done")
	f.passes(h, 1)
	<-lost
	f.passes(h, 2)
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 1 {
		t.Errorf("workflows finished failed: %v, want 1", got)
	}
	if n := strings.Count(f.logs.String(), `"msg":"workflow finished"`); n != 1 {
		t.Errorf("workflow finished logged %d times, want 1:\n%s", n, f.logs.String())
	}
}

// TestLostStepCountedOnceWhenItsReplyIsLost: the pass ending a step lost
// whose script's reply was lost (the server ended it) still counts and
// logs the step lost, once.
func TestLostStepCountedOnceWhenItsReplyIsLost(t *testing.T) {
	f, p := lossyFixture(t)
	h := f.leader(f.config()).handover
	f.lostWorkflow("wf", lostStep{name: "s0", queue: "a"}, lostStep{name: "s1", queue: "a"})
	f.passes(h, 1)
	if err := f.rdb.Del(f.ctx, f.ledger.JobKey("a", "wf.s0")).Err(); err != nil {
		t.Fatal(err)
	}
	lost := p.DropReply("lost:s0", "key_guard") // the script's first run on this server: EVAL
	f.passes(h, 1)
	<-lost
	f.passes(h, 2)
	if got := testutil.ToFloat64(f.metrics.WorkflowStepsLost.WithLabelValues("a")); got != 1 {
		t.Errorf("steps lost: %v, want 1", got)
	}
	if n := strings.Count(f.logs.String(), "job record is missing"); n != 1 {
		t.Errorf("the lost step logged %d times, want 1:\n%s", n, f.logs.String())
	}
}
