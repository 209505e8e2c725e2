package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
)

// TestHandoverPassReadsOnlyChangedWorkflows: a hand-over pass over many
// open, idle workflows reads none of them (a few commands in all, not one
// or more per workflow); a workflow whose step ends is counted finished by
// the next pass (its step in another queue too), and one whose step's job
// was deleted by hand (no script notes it) by the next full pass.
func TestHandoverPassReadsOnlyChangedWorkflows(t *testing.T) {
	f := newFixture(t)
	h := f.leader(f.config()).handover
	const n = 500
	for i := range n {
		id := fmt.Sprintf("w%04d", i)
		w := &ledger.NewWorkflow{ID: id, Home: "a", Record: []byte(`{"steps":[{"name":"s0","queue":"a","id":"` + id + `.s0","kind":"k"}]}`)}
		w.Steps = []ledger.WorkflowStep{{Job: &ledger.NewJob{ID: id + ".s0", Kind: "k", Queue: "a", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s0"}}
		if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("a")); got != n {
		t.Fatalf("workflows started after the first pass: %v, want %d", got, n)
	}
	var cmds commands
	f.rdb.AddHook(&cmds)
	if _, err := f.ledger.Queues(f.ctx); err != nil {
		t.Fatal(err)
	}
	listing := cmds.n.Swap(0)
	for pass := range 3 {
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
		if got, most := cmds.n.Swap(0), listing+8; got > most {
			t.Fatalf("idle pass %d over %d open workflows sent %d commands, want at most %d", pass, n, got, most)
		}
	}

	// a step's end is noted: the next pass counts its workflow finished
	if _, err := f.client.Cancel(f.ctx, "a", "w0007.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 1 {
		t.Fatalf("workflows finished failed after a step's cancel and a pass: %v, want 1", got)
	}
	if f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "w0007").Val() {
		t.Fatal("w0007 still open after the pass that counted it")
	}

	// a workflow of two queues: its step's end in queue b is noted in b
	x := &ledger.NewWorkflow{ID: "x", Home: "a", Record: []byte(`{"steps":[{"name":"s0","queue":"a","id":"x.s0","kind":"k"},{"name":"s1","queue":"b","id":"x.s1","kind":"k"}]}`)}
	x.Steps = []ledger.WorkflowStep{
		{Job: &ledger.NewJob{ID: "x.s0", Kind: "k", Queue: "a", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s0"},
		{Job: &ledger.NewJob{ID: "x.s1", Kind: "k", Queue: "b", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s1"},
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, x); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Cancel(f.ctx, "a", "x.s0", "ops", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "x").Val() {
		t.Fatal("x settled with its step in b still pending")
	}
	if _, err := f.client.Cancel(f.ctx, "b", "x.s1", "ops", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "x").Val() {
		t.Fatal("x still open after the pass following its last step's end, in another queue")
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 2 {
		t.Fatalf("workflows finished failed: %v, want 2", got)
	}

	// deleted by hand: no script notes it; the full pass finds it
	f.rdb.Del(f.ctx, f.ns+":{a}:job:w0009.s0")
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "w0009").Val() {
		t.Fatal("w0009 read by a pass that is not a full one")
	}
	h.fullAt = time.Now().Add(-fullEvery)
	if err := h.runOnce(f.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if f.rdb.SIsMember(f.ctx, f.ns+":{a}:wf_open", "w0009").Val() {
		t.Fatal("w0009, its step's job deleted, still open after a full pass")
	}
	if got := testutil.ToFloat64(f.metrics.WorkflowsFinished.WithLabelValues("a", ledger.WorkflowFailed)); got != 3 {
		t.Fatalf("workflows finished failed after the full pass: %v, want 3", got)
	}
}
