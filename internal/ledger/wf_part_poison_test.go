package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// Corrupt part notes at the front of a queue's index (a whole batch of
// them) are set aside by the pass that reads them: out of wf_parts, left
// in wf_part for an operator, logged once each; the next pass reaches the
// workflows behind them. A corrupt note of a workflow in another queue
// than the one that found it is set aside alike, and does not keep the
// workflow from being abandoned. The pass failed on every such note,
// every time, so the queue's uncommitted workflows behind a batch of them
// were never abandoned.
func TestCorruptPartNotesAreSetAsideOnce(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	var logs syncBuffer
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	pb, pc := ns+":{b}:", ns+":{c}:"
	pipe := rdb.Pipeline()
	for i := range ledger.UncommittedBatch {
		id := fmt.Sprintf("bad%04d", i)
		pipe.HSet(ctx, pb+"wf_part", id, corruptPartNotes[i%len(corruptPartNotes)])
		pipe.ZAdd(ctx, pb+"wf_parts", redis.Z{Score: 1, Member: id})
	}
	// w1, never committed, behind them; its note in c is corrupt and
	// out of c's index
	pipe.HSet(ctx, l.JobKey("b", "s1"), "wf", "w1", "step", "s1", "kind", "k", "state", string(ledger.Waiting))
	pipe.HSet(ctx, pb+"wf_part", "w1", `{"home":"a","ids":["s1"]}`)
	pipe.ZAdd(ctx, pb+"wf_parts", redis.Z{Score: 2, Member: "w1"})
	pipe.HSet(ctx, pc+"wf_part", "w1", "{")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	const said = "set aside"
	var abandoned []string
	for pass := 0; pass < 2 && !slices.Contains(abandoned, "w1"); pass++ {
		ids, err := l.AbandonUncommitted(ctx, []string{"b", "c"}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		abandoned = append(abandoned, ids...)
	}
	if !slices.Equal(abandoned, []string{"w1"}) {
		t.Fatalf("abandoned %v, want w1 by the second pass", abandoned)
	}
	if s, err := l.Get(ctx, "b", "s1"); err != nil || s.State != ledger.Cancelled {
		t.Fatalf("w1's step: %+v, %v; want cancelled", s, err)
	}
	if n := rdb.ZCard(ctx, pb+"wf_parts").Val(); n != 0 {
		t.Fatalf("%d parts left in b's index", n)
	}
	if n := rdb.HLen(ctx, pb+"wf_part").Val(); n != ledger.UncommittedBatch {
		t.Fatalf("b's notes: %d, want the %d corrupt ones kept", n, ledger.UncommittedBatch)
	}
	if got := rdb.HGet(ctx, pc+"wf_part", "w1").Val(); got != "{" {
		t.Fatalf("w1's note in c: %q, want kept", got)
	}
	if n := logs.count(said); n != ledger.UncommittedBatch+1 {
		t.Fatalf("%d notes logged as set aside, want %d", n, ledger.UncommittedBatch+1)
	}
	if _, err := l.AbandonUncommitted(ctx, []string{"b", "c"}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := logs.count(said); n != ledger.UncommittedBatch+1 {
		t.Fatalf("a later pass logged notes again: %d", n)
	}
}
