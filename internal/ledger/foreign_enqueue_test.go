package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A job whose own key, limit key or group key holds another type (written
// by hand) is left out of its enqueue batch with ErrForeignKey and nothing
// written for it, while the batch's other jobs are enqueued whole. Redis
// keeps a script's writes before an error, so failing on that job left the
// jobs before it written but in no index (never to run), their operation
// ids and unique keys taken, and the jobs after it not enqueued.
func TestForeignKeyLeavesOutOneJobOfABatch(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	poison := map[string]func(j *ledger.NewJob){
		"own key": func(j *ledger.NewJob) {
			rdb.Set(ctx, l.JobKey(q, j.ID), "x", 0)
		},
		"named id key": func(j *ledger.NewJob) {
			j.ID = ledger.OpJobID(q, j.OperationID)
			rdb.RPush(ctx, l.JobKey(q, j.ID), "x")
		},
		"limit holders": func(j *ledger.NewJob) {
			j.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 1}
			rdb.Set(ctx, ns+":{"+q+"}:limit:acct:holders", "x", 0)
		},
		"limit waiting": func(j *ledger.NewJob) {
			j.Flow = &ledger.Flow{LimitKey: "acct2", LimitMax: 1}
			rdb.HSet(ctx, ns+":{"+q+"}:limit:acct2:wait", "x", "y")
		},
		"group": func(j *ledger.NewJob) {
			j.Group = "g"
			rdb.Set(ctx, ns+":{"+q+"}:group:g", "x", 0)
		},
	}
	for name, plant := range poison {
		for _, unique := range []bool{false, true} {
			before, err := l.Stats(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			first, bad, last := newJob(q, ""), newJob(q, fmt.Sprintf("op-%s-%v", strings.ReplaceAll(name, " ", "_"), unique)), newJob(q, "")
			if unique { // every job through enqueue_unique.lua
				first.Unique = &ledger.Unique{Digest: "d-" + name, States: []ledger.State{ledger.Pending}}
			}
			plant(bad)
			ins, err := l.Insert(ctx, []*ledger.NewJob{first, bad, last})
			if !errors.Is(err, ledger.ErrForeignKey) || len(ins) != 3 || ins[0] == nil || ins[1] != nil || ins[2] == nil ||
				ins[0].Deduplicated || ins[2].Deduplicated {
				t.Fatalf("%s (unique %v): %v, %v; want the first and last created, the other left out with ErrForeignKey", name, unique, ins, err)
			}
			ids, err := l.IDs(ctx, q, ledger.Pending, 0, 1000)
			if err != nil || !slices.Contains(ids, first.ID) || !slices.Contains(ids, last.ID) || slices.Contains(ids, bad.ID) {
				t.Fatalf("%s (unique %v): pending index %v (%v), want %s and %s, not %s", name, unique, ids, err, first.ID, last.ID, bad.ID)
			}
			after, err := l.Stats(ctx, q)
			if err != nil || after["enqueued"]-before["enqueued"] != 2 {
				t.Fatalf("%s (unique %v): enqueued counter %d then %d (%v), want 2 more", name, unique, before["enqueued"], after["enqueued"], err)
			}
			if bad.Flow == nil && bad.Group == "" {
				if n, err := rdb.Exists(ctx, ns+":{"+q+"}:op:"+bad.OperationID).Result(); err != nil || n != 0 {
					t.Fatalf("%s (unique %v): operation key written for a job left out (%v)", name, unique, err)
				}
			} else if n, err := rdb.Exists(ctx, l.JobKey(q, bad.ID)).Result(); err != nil || n != 0 {
				t.Fatalf("%s (unique %v): a job left out has a record (%v)", name, unique, err)
			}
			// the operation id names no job: once the key is fixed, enqueueing it again creates it
			rdb.Del(ctx, l.JobKey(q, bad.ID), ns+":{"+q+"}:limit:acct:holders", ns+":{"+q+"}:limit:acct2:wait", ns+":{"+q+"}:group:g")
			if again, err := l.Insert(ctx, []*ledger.NewJob{bad}); err != nil || again[0].Deduplicated {
				t.Fatalf("%s (unique %v): enqueued again: %+v, %v; want it created", name, unique, again[0], err)
			}
		}
	}
}

// A workflow one of whose keys (a step's record or waits set, the
// workflow's record) holds another type is refused with ErrForeignKey
// before anything of it is written, and enqueued whole once the key is
// gone. Failing at that key left the steps before it written, in no
// index or waiting on a workflow never committed.
func TestForeignKeyRefusesAWorkflowWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "a"
	p := ns + ":{" + q + "}:"
	for n, key := range []string{"job:%s.s2", "job:%s.s1:waits", "wf:%s"} {
		id := fmt.Sprintf("wf%d", n)
		w := wfGraph{deps: [][]int{{}, {0}, {1}}, queues: []string{q, q, q}}.build(id)
		k := p + fmt.Sprintf(key, id)
		rdb.Set(ctx, k, "x", 0)
		before, err := l.Stats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.EnqueueWorkflow(ctx, w); !errors.Is(err, ledger.ErrForeignKey) {
			t.Fatalf("%s of another type: %v, want ErrForeignKey", k, err)
		}
		for _, s := range w.Steps {
			if n, err := rdb.Exists(ctx, l.JobKey(q, s.Job.ID)+":waits").Result(); err != nil || n != 0 && !strings.HasSuffix(k, s.Job.ID+":waits") {
				t.Fatalf("%s of another type: step %s's waits written (%v)", k, s.Name, err)
			}
			if _, err := l.Get(ctx, q, s.Job.ID); !errors.Is(err, ledger.ErrNotFound) && k != l.JobKey(q, s.Job.ID) {
				t.Fatalf("%s of another type: step %s written (%v)", k, s.Name, err)
			}
		}
		after, err := l.Stats(ctx, q)
		if err != nil || after["seq"] != before["seq"] || after["enqueued"] != before["enqueued"] {
			t.Fatalf("%s of another type: counters %v then %v (%v), want them unchanged", k, before, after, err)
		}
		rdb.Del(ctx, k)
		if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
			t.Fatalf("enqueued again once %s is gone: %v", k, err)
		}
		if s := stateOf(t, l, w.Steps[0].Job); s != ledger.Pending {
			t.Fatalf("root step enqueued again: %s, want pending", s)
		}
	}
}

// A completion delivering to a waiting step whose dependency set holds
// another type (written by hand) applies, the step going to review and
// the other dependents promoted. Failing there left the completed step
// finished in its record but running in the index, its dependents never
// told.
func TestForeignWaitsKeyFailsNoCompletion(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "a"
	w := wfGraph{deps: [][]int{{}, {0}, {0}}, queues: []string{q, q, q}}.build("wf")
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	k := l.JobKey(q, w.Steps[1].Job.ID) + ":waits"
	rdb.Del(ctx, k)
	rdb.Set(ctx, k, "x", 0)
	runStep(t, l, w, 0)
	if s := stateOf(t, l, w.Steps[0].Job); s != ledger.Succeeded {
		t.Fatalf("completed step: %s, want succeeded", s)
	}
	rec, err := l.Get(ctx, q, w.Steps[1].Job.ID)
	if err != nil || rec.State != ledger.Review || rec.Reason != "corrupt workflow key: holds another type" {
		t.Fatalf("step with a foreign waits key: %+v, %v; want it in review", rec, err)
	}
	if s := stateOf(t, l, w.Steps[2].Job); s != ledger.Pending {
		t.Fatalf("other dependent: %s, want pending", s)
	}
	running, err := l.IDs(ctx, q, ledger.Running, 0, 100)
	if err != nil || len(running) != 0 {
		t.Fatalf("running index %v (%v), want it empty", running, err)
	}
}
