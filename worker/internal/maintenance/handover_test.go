package maintenance

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// TestHandoverPassMovesWhatACompleterLeft: a hand-over record left in
// queue a (its completer crashed before moving it) is delivered by one
// pass: b's step becomes pending, the record is gone, the workflow is
// counted started once; a second pass changes nothing.
func TestHandoverPassMovesWhatACompleterLeft(t *testing.T) {
	f := newFixture(t)
	w := &ledger.NewWorkflow{ID: "wf1", Home: "a", Record: []byte(`{"steps":[{"name":"s0","queue":"a","id":"wf1.s0","kind":"k"},{"name":"s1","queue":"b","id":"wf1.s1","kind":"k","deps":["s0"]}]}`)}
	w.Steps = []ledger.WorkflowStep{
		{Job: &ledger.NewJob{ID: "wf1.s0", Kind: "k", Queue: "a", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s0",
			Next: []ledger.StepRef{{Queue: "b", ID: "wf1.s1"}}},
		{Job: &ledger.NewJob{ID: "wf1.s1", Kind: "k", Queue: "b", Payload: []byte(`{}`), Display: []byte(`{}`)}, Name: "s1", Deps: []string{"s0"}},
	}
	if _, _, err := f.ledger.EnqueueWorkflow(f.ctx, w); err != nil {
		t.Fatal(err)
	}
	// what a.s0's completion writes, its move never made
	hk := f.ns + ":{a}:handover"
	f.rdb.HSet(f.ctx, hk, "b\nwf1.s1\ns0", "succeeded 7")
	h := f.leader(f.config()).handover
	for range 2 {
		if err := h.runOnce(f.ctx, 0); err != nil {
			t.Fatal(err)
		}
		r, err := f.ledger.Get(f.ctx, "b", "wf1.s1")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != jobs.Pending {
			t.Fatalf("b's step after the pass: %s", r.State)
		}
		if n := f.rdb.HLen(f.ctx, hk).Val(); n != 0 {
			t.Fatalf("%d hand-over records left", n)
		}
		if n := testutil.ToFloat64(f.metrics.WorkflowsStarted.WithLabelValues("a")); n != 1 {
			t.Fatalf("workflows started %v, want 1", n)
		}
	}
}
