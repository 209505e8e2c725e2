package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// finishStep claims step i (it must be pending) and ends it with to.
func finishStep(t *testing.T, l *ledger.Ledger, w *ledger.NewWorkflow, i int, to ledger.State) {
	t.Helper()
	ctx := context.Background()
	j := w.Steps[i].Job
	c, err := l.ClaimJob(ctx, j.Queue, j.ID, "t", time.Minute)
	if err != nil {
		t.Fatalf("claim %s: %v", j.ID, err)
	}
	got, err := l.Complete(ctx, j.Queue, []ledger.Completion{{ID: j.ID, Token: c.Token, Outcome: ledger.Outcome{To: to, Reason: "test"}}})
	if err != nil || !got[0].Applied {
		t.Fatalf("complete %s: %+v %v", j.ID, got, err)
	}
}

// TestReopenedFanInWaitsForItsOtherDependencies: s2 waits for s0 and s1;
// s0 dies (s2 cancelled), an operator re-runs s0 and it succeeds while s1
// has not run yet: s2 must wait for s1, in one queue and across queues.
func TestReopenedFanInWaitsForItsOtherDependencies(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	ctx := context.Background()
	for name, qs := range map[string][]string{"one queue": {"ra", "ra", "ra"}, "across queues": {"ra", "rb", "rc"}} {
		t.Run(name, func(t *testing.T) {
			w := wfGraph{deps: [][]int{{}, {}, {0, 1}}, queues: qs}.build("r-" + qs[1])
			if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
				t.Fatal(err)
			}
			finishStep(t, l, w, 0, ledger.Dead)
			s0 := w.Steps[0].Job
			if s := stateOf(t, l, w.Steps[2].Job); s != jobs.Cancelled {
				t.Fatalf("s2 after s0 died: %s", s)
			}
			if _, err := l.Decide(ctx, s0.Queue, s0.ID, ledger.Resolution{From: []ledger.State{jobs.Dead}, Decision: ledger.DecideRerun, Actor: "operator:ada"}); err != nil {
				t.Fatal(err)
			}
			if s := stateOf(t, l, w.Steps[2].Job); s != ledger.Waiting {
				t.Fatalf("s2 after s0's re-run: %s", s)
			}
			finishStep(t, l, w, 0, jobs.Succeeded)
			if s := stateOf(t, l, w.Steps[1].Job); s != jobs.Pending {
				t.Fatalf("s1: %s", s)
			}
			if s := stateOf(t, l, w.Steps[2].Job); s != ledger.Waiting {
				t.Fatalf("s2 is %s while its dependency s1 has not run", s)
			}
			finishStep(t, l, w, 1, jobs.Succeeded)
			if s := stateOf(t, l, w.Steps[2].Job); s != jobs.Pending {
				t.Fatalf("s2 after both dependencies succeeded: %s", s)
			}
		})
	}
}

// TestReRunSucceedingBeforeItsReopenMovedResumesTheDependent: s0 (queue a)
// dies, cancelling s1 (queue b); an operator re-runs s0, and s0 succeeds
// before the re-run's hand-over is moved (the mover died): the newer end
// replaces the record, so s1 hears only "succeeded". s1 must run.
func TestReRunSucceedingBeforeItsReopenMovedResumesTheDependent(t *testing.T) {
	restore := ledger.HoldHandovers()
	defer restore()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	ctx := context.Background()
	w := wfGraph{deps: [][]int{{}, {0}}, queues: []string{"a", "b"}}.build("rs")
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	finishStep(t, l, w, 0, ledger.Dead)
	if _, err := l.MoveHandovers(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, l, w.Steps[1].Job); s != jobs.Cancelled {
		t.Fatalf("s1 after s0 died: %s", s)
	}
	s0 := w.Steps[0].Job
	if _, err := l.Decide(ctx, "a", s0.ID, ledger.Resolution{From: []ledger.State{jobs.Dead}, Decision: ledger.DecideRerun, Actor: "operator:ada"}); err != nil {
		t.Fatal(err)
	}
	finishStep(t, l, w, 0, jobs.Succeeded) // before the reopen was moved
	if _, err := l.MoveHandovers(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(t, l, w.Steps[1].Job); s != jobs.Pending {
		t.Fatalf("s1 after its dependency's re-run succeeded: %s, want pending", s)
	}
}

// TestReRunOfACancelledWaitingStepWaitsForItsDependencies: an operator
// cancels a waiting step (or its workflow), then re-runs it: it must wait
// for the dependencies that have not succeeded, not run at once.
func TestReRunOfACancelledWaitingStepWaitsForItsDependencies(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	ctx := context.Background()
	for name, qs := range map[string][]string{"one queue": {"oa", "oa", "oa"}, "across queues": {"oa", "ob", "oc"}} {
		t.Run(name, func(t *testing.T) {
			w := wfGraph{deps: [][]int{{}, {}, {0, 1}}, queues: qs}.build("o-" + qs[1])
			if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
				t.Fatal(err)
			}
			s2 := w.Steps[2].Job
			if _, err := l.Cancel(ctx, s2.Queue, s2.ID, "operator:ada", "stop"); err != nil {
				t.Fatal(err)
			}
			finishStep(t, l, w, 0, jobs.Succeeded) // s1 has not run
			if _, err := l.Decide(ctx, s2.Queue, s2.ID, ledger.Resolution{From: []ledger.State{jobs.Cancelled}, Decision: ledger.DecideRerun, Actor: "operator:ada"}); err != nil {
				t.Fatal(err)
			}
			if s := stateOf(t, l, s2); s != ledger.Waiting {
				t.Fatalf("s2 re-run while its dependency s1 has not run: %s, want waiting", s)
			}
			finishStep(t, l, w, 1, jobs.Succeeded)
			if s := stateOf(t, l, s2); s != jobs.Pending {
				t.Fatalf("s2 after both dependencies succeeded: %s", s)
			}
		})
	}
}

// TestReopenWithAnotherFailedDependencyStaysCancelled: s2 waits for s0 and
// s1, both die; re-running s0 leaves s2 cancelled by s1 (not waiting for a
// dead step), and re-running s1 too resumes it. What a cancelled step keeps
// for a re-run expires with its job.
func TestReopenWithAnotherFailedDependencyStaysCancelled(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	ctx := context.Background()
	w := wfGraph{deps: [][]int{{}, {}, {0, 1}}, queues: []string{"fa", "fb", "fc"}}.build("f")
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	finishStep(t, l, w, 0, ledger.Dead)
	finishStep(t, l, w, 1, ledger.Dead)
	s2 := w.Steps[2].Job
	for _, k := range []string{ns + ":{fc}:job:" + s2.ID + ":waits", ns + ":{fc}:job:" + s2.ID + ":wf_failed"} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("%s expires in %v, want its job's retention", k, ttl)
		}
	}
	rerun := func(i int) {
		j := w.Steps[i].Job
		if _, err := l.Decide(ctx, j.Queue, j.ID, ledger.Resolution{From: []ledger.State{jobs.Dead}, Decision: ledger.DecideRerun, Actor: "operator:ada"}); err != nil {
			t.Fatal(err)
		}
	}
	rerun(0)
	finishStep(t, l, w, 0, jobs.Succeeded)
	r, err := l.Get(ctx, s2.Queue, s2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != jobs.Cancelled || r.Reason != "dependency s1 ended dead" {
		t.Fatalf("s2 after s0's re-run succeeded: %s (%q), want cancelled by s1", r.State, r.Reason)
	}
	rerun(1)
	if s := stateOf(t, l, s2); s != ledger.Waiting {
		t.Fatalf("s2 after s1's re-run: %s", s)
	}
	finishStep(t, l, w, 1, jobs.Succeeded)
	if s := stateOf(t, l, s2); s != jobs.Pending {
		t.Fatalf("s2 after both re-runs succeeded: %s", s)
	}
}
