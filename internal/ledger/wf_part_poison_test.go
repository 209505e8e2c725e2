package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// corruptPartNotes are part notes (wf_part) edited by hand into what
// wf_enqueue.lua and AbandonUncommitted cannot read: not JSON, JSON of
// another shape, step ids that are not strings.
var corruptPartNotes = []string{"{", "abc", `"x"`, "[1]", `{"home":"a","ids":5}`, `{"home":"a","ids":[1]}`,
	`{"home":"a","ids":{"x":"y"}}`, `{"home":5,"ids":[]}`}

// A workflow's part call (a step in another queue than its home) whose
// queue holds a corrupt note of the workflow's steps fails with
// ErrForeignKey before it writes anything: no step of it in that queue,
// no record, the note as it was. It wrote the steps, then failed on the
// note, every try. Once the note is gone the workflow enqueues.
func TestCorruptPartNoteFailsItsWorkflowBeforeAnyWrite(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	notes := ns + ":{b}:wf_part"
	for i, bad := range corruptPartNotes {
		id := fmt.Sprintf("wf%d", i)
		w := wfGraph{deps: [][]int{{}, {0}, {}}, queues: []string{"a", "b", "b"}}.build(id)
		rdb.HSet(ctx, notes, id, bad)
		_, _, err := l.EnqueueWorkflow(ctx, w)
		if !errors.Is(err, jobs.ErrForeignKey) || !strings.Contains(err.Error(), "wf_part") {
			t.Fatalf("note %q: enqueue: %v, want ErrForeignKey naming wf_part", bad, err)
		}
		for _, s := range w.Steps {
			if _, err := l.Get(ctx, s.Job.Queue, s.Job.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("note %q: step %s: %v, want not written", bad, s.Name, err)
			}
		}
		if rdb.Exists(ctx, ns+":{a}:wf:"+id).Val() != 0 || rdb.ZScore(ctx, ns+":{b}:wf_parts", id).Err() == nil {
			t.Fatalf("note %q: the workflow's record or part index was written", bad)
		}
		if got := rdb.HGet(ctx, notes, id).Val(); got != bad {
			t.Fatalf("note %q: now %q", bad, got)
		}
		rdb.HDel(ctx, notes, id)
		if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
			t.Fatalf("note %q: enqueue once the note is gone: %v", bad, err)
		}
	}
}
