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
