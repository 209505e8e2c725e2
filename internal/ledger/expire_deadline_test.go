package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A running job whose deadline was edited by hand into something that is
// not a sane deadline (infinity, NaN, beyond a year ahead, garbage) is
// taken as lapsed: the expiry moves it to uncertain as any lapsed lease,
// and its attempt's token no longer completes it. The expiry followed
// such a deadline into the running index, where no pass reached it again:
// with its pool gone the job stayed running for ever.
func TestInsaneDeadlineIsLapsed(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	for _, bad := range []string{"inf", "+inf", "nan", "1e300", "99999999999999999999", "9e15", "abc", "0x7fffffffffff"} {
		js := []*ledger.NewJob{newJob(q, "")}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "gone", time.Minute, 1)
		if err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		j := r.Jobs[0]
		rdb.HSet(ctx, l.JobKey(q, j.ID), "deadline", bad)
		rdb.ZAdd(ctx, l.StateKey(q, ledger.Running), redis.Z{Score: 1, Member: j.ID}) // its lease lapsed
		ex, err := l.Expire(ctx, q, 0, 100)
		if err != nil {
			t.Fatalf("deadline %q: expire: %v", bad, err)
		}
		if rec, err := l.Get(ctx, q, j.ID); err != nil || rec.State != ledger.Uncertain {
			t.Fatalf("deadline %q: %+v (%v), %v; want uncertain", bad, rec, ex, err)
		}
		out, err := l.Complete(ctx, q, []ledger.Completion{{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
		if err != nil || len(out) != 1 || out[0].Applied {
			t.Fatalf("deadline %q: the lapsed attempt's completion: %+v, %v; want refused", bad, out, err)
		}
	}
}
