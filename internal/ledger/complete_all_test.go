package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestCompleteAllAppliesEachQueuesOutcomes: the outcomes of three queues
// go in one call; each queue gets its own answers (applied, or stale for a
// token that no longer runs the job) and its own error (an invalid
// outcome fails its queue alone, with nothing written).
func TestCompleteAllAppliesEachQueuesOutcomes(t *testing.T) {
	rdb, _ := redistest.New(t)
	f := newFixture(t, rdb)
	claim := func(q string) ledger.Claimed {
		t.Helper()
		if _, err := f.c.Enqueue(f.ctx, noteArgs{Text: q}, jobs.Queue(q)); err != nil {
			t.Fatal(err)
		}
		res, err := f.l.Claim(f.ctx, q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("claim %s: %+v, %v", q, res, err)
		}
		return res.Jobs[0]
	}
	a, b, c := claim("qa"), claim("qb"), claim("qc")
	ok := ledger.Outcome{To: jobs.Succeeded}
	out, errs := f.l.CompleteAll(f.ctx, []ledger.QueueCompletions{
		{Queue: "qa", Completions: []ledger.Completion{{ID: a.ID, Token: a.Token, Outcome: ok}}},
		{Queue: "qb", Completions: []ledger.Completion{{ID: b.ID, Token: b.Token - 1, Outcome: ok}}}, // stale
		{Queue: "qc", Completions: []ledger.Completion{{ID: c.ID, Token: c.Token, Outcome: ledger.Outcome{To: jobs.Running}}}},
		{Queue: "qd"}, // nothing to apply
	})
	if errs[0] != nil || len(out[0]) != 1 || !out[0][0].Applied || out[0][0].State != jobs.Succeeded {
		t.Fatalf("qa: %+v, %v", out[0], errs[0])
	}
	if errs[1] != nil || len(out[1]) != 1 || out[1][0].Applied || out[1][0].Current != b.Token {
		t.Fatalf("qb (stale token): %+v, %v", out[1], errs[1])
	}
	if !errors.Is(errs[2], jobs.ErrInvalid) || out[2] != nil {
		t.Fatalf("qc (invalid outcome): %+v, %v", out[2], errs[2])
	}
	if errs[3] != nil || out[3] != nil {
		t.Fatalf("qd (empty): %+v, %v", out[3], errs[3])
	}
	for q, want := range map[string]struct {
		id string
		s  jobs.State
	}{"qa": {a.ID, jobs.Succeeded}, "qb": {b.ID, jobs.Running}, "qc": {c.ID, jobs.Running}} {
		rec, err := f.l.Get(f.ctx, q, want.id)
		if err != nil || rec.State != want.s {
			t.Fatalf("%s: %+v, %v; want %s", q, rec, err, want.s)
		}
	}
}
