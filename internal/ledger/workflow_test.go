package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// wfGraph is a workflow for the ledger's own tests: steps s0..sN-1, deps
// by index, queue by index.
type wfGraph struct {
	deps   [][]int
	queues []string
}

func (g wfGraph) build(id string) *ledger.NewWorkflow {
	w := &ledger.NewWorkflow{ID: id, Home: g.queues[0], Record: []byte(`{"steps":[]}`)}
	name := func(i int) string { return fmt.Sprintf("s%d", i) }
	for i := range g.deps {
		j := &ledger.NewJob{ID: id + "." + name(i), Kind: "note", Queue: g.queues[i], Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 3}
		s := ledger.WorkflowStep{Job: j, Name: name(i)}
		for _, d := range g.deps[i] {
			s.Deps = append(s.Deps, name(d))
		}
		for k := range g.deps {
			for _, d := range g.deps[k] {
				if d == i {
					s.Next = append(s.Next, ledger.StepRef{Queue: g.queues[k], ID: id + "." + name(k)})
				}
			}
		}
		w.Steps = append(w.Steps, s)
	}
	return w
}

// runStep claims step i (it must be pending) and completes it succeeded.
func runStep(t *testing.T, l *ledger.Ledger, w *ledger.NewWorkflow, i int) {
	t.Helper()
	ctx := context.Background()
	j := w.Steps[i].Job
	c, err := l.ClaimJob(ctx, j.Queue, j.ID, "t", time.Minute)
	if err != nil {
		t.Fatalf("claim %s: %v", j.ID, err)
	}
	got, err := l.Complete(ctx, j.Queue, []ledger.Completion{{ID: j.ID, Token: c.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
	if err != nil || !got[0].Applied {
		t.Fatalf("complete %s: %+v %v", j.ID, got, err)
	}
}

func stateOf(t *testing.T, l *ledger.Ledger, j *ledger.NewJob) ledger.State {
	t.Helper()
	r, err := l.Get(context.Background(), j.Queue, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// TestHandoverSurvivesARestartAndIsDeliveredOnce: a step completes in
// queue a; Redis restarts (AOF) before its hand-over to queue b is moved;
// the record survives, its delivery promotes b's step, and delivering it
// again (a mover that crashed before its acknowledgement) changes nothing.
func TestHandoverSurvivesARestartAndIsDeliveredOnce(t *testing.T) {
	restore := ledger.HoldHandovers()
	defer restore()
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	w := wfGraph{deps: [][]int{{}, {0}}, queues: []string{"a", "b"}}.build("wf1")
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	runStep(t, l, w, 0)
	hk := ns + ":{a}:handover"
	recs, err := rdb.HGetAll(ctx, hk).Result()
	if err != nil || len(recs) != 1 {
		t.Fatalf("hand-over records after the completion: %v %v", recs, err)
	}
	if s := stateOf(t, l, w.Steps[1].Job); s != ledger.Waiting {
		t.Fatalf("b before the move: %s", s)
	}
	srv.Restart()
	if got, _ := rdb.HGetAll(ctx, hk).Result(); len(got) != 1 {
		t.Fatalf("hand-over records after the restart: %v", got)
	}
	if n, err := l.MoveHandovers(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("move: %d %v", n, err)
	}
	if s := stateOf(t, l, w.Steps[1].Job); s != jobs.Pending {
		t.Fatalf("b after the move: %s", s)
	}
	// the same record again, as if the acknowledgement never happened
	for f, v := range recs {
		rdb.HSet(ctx, hk, f, v)
	}
	c, err := l.ClaimJob(ctx, "b", w.Steps[1].Job.ID, "t", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.MoveHandovers(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("second move: %d %v", n, err)
	}
	r, err := l.Get(ctx, "b", w.Steps[1].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != jobs.Running || r.Token != c.Token || r.Attempts != 1 {
		t.Fatalf("b after a second delivery: %s token %d attempts %d, want the same running attempt", r.State, r.Token, r.Attempts)
	}
	if n, _ := rdb.ZCard(ctx, ns+":{b}:pending").Result(); n != 0 {
		t.Fatalf("b is in the pending index again (%d)", n)
	}
}

// TestPromotionRuleModel drives random graphs over two queues with every
// interleaving the model allows: steps run in any order among those
// pending, hand-overs are moved late, twice, or re-delivered after their
// acknowledgement was lost, and completions are applied twice. After each
// action: a step is pending, running or succeeded only when every
// dependency succeeded, and no step ever runs twice; at the end every step
// succeeded.
func TestPromotionRuleModel(t *testing.T) {
	restore := ledger.HoldHandovers()
	defer restore()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()
	queues := []string{"ma", "mb"}
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		n := 2 + rng.IntN(9)
		g := wfGraph{deps: make([][]int, n), queues: make([]string, n)}
		for i := range n {
			g.queues[i] = queues[rng.IntN(2)]
			for d := range i {
				if rng.IntN(3) == 0 {
					g.deps[i] = append(g.deps[i], d)
				}
			}
		}
		w := g.build(fmt.Sprintf("m%d", seed))
		if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
			t.Fatal(err)
		}
		ran := make([]int, n)
		running := map[int]lease.Token{}
		var seen []map[string]string // hand-over records read before a move
		check := func(when string) {
			states := make([]ledger.State, n)
			for i := range n {
				states[i] = stateOf(t, l, w.Steps[i].Job)
			}
			for i := range n {
				if states[i] == ledger.Waiting {
					continue
				}
				for _, d := range g.deps[i] {
					if states[d] != jobs.Succeeded {
						t.Fatalf("seed %d, %s: s%d is %s while its dependency s%d is %s", seed, when, i, states[i], d, states[d])
					}
				}
			}
		}
		for steps := 0; steps < 600; steps++ {
			var pending []int
			for i := range n {
				if stateOf(t, l, w.Steps[i].Job) == jobs.Pending {
					pending = append(pending, i)
				}
			}
			done := len(running) == 0
			for i := range n {
				if ran[i] == 0 {
					done = false
				}
			}
			if done {
				break
			}
			switch a := rng.IntN(5); {
			case a == 0 && len(pending) > 0:
				i := pending[rng.IntN(len(pending))]
				ran[i]++
				if ran[i] > 1 {
					t.Fatalf("seed %d: s%d ran twice", seed, i)
				}
				j := w.Steps[i].Job
				c, err := l.ClaimJob(ctx, j.Queue, j.ID, "t", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				running[i] = c.Token
				check("after a claim")
			case a == 3 && len(running) > 0:
				for i, tok := range running { // any one
					j := w.Steps[i].Job
					times := 1 + rng.IntN(2) // the completion applied twice: the second refused
					for k := range times {
						got, err := l.Complete(ctx, j.Queue, []ledger.Completion{{ID: j.ID, Token: tok, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
						if err != nil || got[0].Applied != (k == 0) {
							t.Fatalf("seed %d: completion %d of s%d: %+v %v", seed, k, i, got, err)
						}
					}
					delete(running, i)
					break
				}
				check("after a completion")
			case a == 1 || (a == 0 && len(pending) == 0):
				q := queues[rng.IntN(2)]
				recs, _ := rdb.HGetAll(ctx, ns+":{"+q+"}:handover").Result()
				if len(recs) > 0 {
					seen = append(seen, map[string]string{"q": q})
					for f, v := range recs {
						seen[len(seen)-1][f] = v
					}
				}
				if _, err := l.MoveHandovers(ctx, q); err != nil {
					t.Fatal(err)
				}
				check("after a move")
			case a == 2 && len(seen) > 0:
				old := seen[rng.IntN(len(seen))]
				for f, v := range old {
					if f != "q" {
						rdb.HSet(ctx, ns+":{"+old["q"]+"}:handover", f, v)
					}
				}
				check("after a lost acknowledgement")
			default:
				check("idle")
			}
		}
		for i := range n {
			if ran[i] != 1 {
				t.Fatalf("seed %d: s%d ran %d times (graph %v, queues %v)", seed, i, ran[i], g.deps, g.queues)
			}
		}
	}
}
