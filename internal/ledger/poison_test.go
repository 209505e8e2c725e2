package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A record whose token was overwritten with something that is not a token
// fences its own commit (reported stale, its current token read as 0) and
// nothing else: the other outcomes of the batch apply.
func TestCorruptTokenFencesOnlyItsOwnCommit(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	for _, bad := range []string{"abc", "-1", "99999999999999999999999", ""} {
		js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 3)
		if err != nil || len(r.Jobs) != 3 {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		poisoned := r.Jobs[1].ID
		rdb.HSet(ctx, l.JobKey(q, poisoned), "token", bad)
		var cs []ledger.Completion
		for _, j := range r.Jobs {
			cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}})
		}
		out, err := l.Complete(ctx, q, cs)
		if err != nil || len(out) != 3 {
			t.Fatalf("token %q: complete: %+v, %v", bad, out, err)
		}
		for i, c := range out {
			switch {
			case r.Jobs[i].ID == poisoned && (c.Applied || c.Current != 0 || c.State != ledger.Running):
				t.Fatalf("token %q: the corrupt record's commit: %+v, want stale, running, current token 0", bad, c)
			case r.Jobs[i].ID != poisoned && (!c.Applied || c.State != ledger.Succeeded):
				t.Fatalf("token %q: job %d: %+v, want applied", bad, i, c)
			}
		}
	}
}

// A record whose count of put-backs for an unknown kind was overwritten
// with something that is not a number is put back all the same, its
// count read as 0, and the other outcomes of the batch apply.
func TestCorruptKindDefersFailsNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 3)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	poisoned := r.Jobs[1].ID
	rdb.HSet(ctx, l.JobKey(q, poisoned), "kind_defers", "abc")
	var cs []ledger.Completion
	for _, j := range r.Jobs {
		o := ledger.Outcome{To: ledger.Succeeded}
		if j.ID == poisoned {
			o = ledger.Outcome{Defer: true, UnknownKind: true, RetryIn: time.Second}
		}
		cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: o})
	}
	out, err := l.Complete(ctx, q, cs)
	if err != nil || len(out) != 3 {
		t.Fatalf("complete: %+v, %v", out, err)
	}
	for i, c := range out {
		if !c.Applied {
			t.Errorf("job %d: %+v, want applied", i, c)
		}
	}
	rec, err := l.Get(ctx, q, poisoned)
	if err != nil || rec.State != ledger.Pending || rec.KindDefers != 1 {
		t.Fatalf("the put-back job: %+v, %v; want pending, put back once", rec, err)
	}
}

// A record with any one field edited by hand to garbage (text where a
// number or token goes, digits beyond 2^64, a lone JSON brace, a flow
// field's prefix with nothing after it) fails neither the claim that
// takes it nor the completion of its batch: a failing script would leave
// the batch's other jobs taken off the due index with no pool running
// them. Each job is claimed or reported dropped.
func TestEditedFieldFailsNoClaimNorCompletion(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	fields := []string{"op", "resource", "timeout_ms", "kind_defers", "hist", "fence", "mark", "headers", "flow",
		"group", "run_at", "token", "created", "max_retries", "payload", "kind", "args", "wait", "lkey", "lmax",
		"rkey", "rmax", "rper", "wf", "cancel", "attempts"}
	values := []string{"abc", "", "-5", "1e400", "99999999999999999999999999", "18446744073709551616", "{", "L", "R", "\xff"}
	for _, f := range fields {
		for _, v := range values {
			js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
			if _, err := l.Insert(ctx, js); err != nil {
				t.Fatal(err)
			}
			rdb.HSet(ctx, l.JobKey(q, js[1].ID), f, v)
			r, err := l.Claim(ctx, q, "p", time.Minute, 3)
			if err != nil || len(r.Jobs)+len(r.Dropped) != 3 {
				t.Errorf("%s=%q: claim %+v, %v", f, v, r, err)
				continue
			}
			var cs []ledger.Completion
			for _, j := range r.Jobs {
				cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Pending, RetryIn: time.Hour}})
			}
			if out, err := l.Complete(ctx, q, cs); err != nil || len(out) != len(cs) {
				t.Errorf("%s=%q: complete %+v, %v", f, v, out, err)
			}
		}
	}
}
