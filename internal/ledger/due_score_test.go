package ledger_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A pending job whose due score was edited to +inf or 1e300 is not due
// now: FirstDue converted the score to an integer as it came, which for a
// value beyond int64 gives whatever the platform gives (the least int64
// on amd64), so the queue showed as due at every look and an idle pool
// claimed it again and again, finding nothing. A score of -inf is due.
func TestFirstDueOfAScoreBeyondInt64(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	for _, c := range []struct {
		score float64
		due   bool
	}{{math.Inf(1), false}, {1e300, false}, {-1e300, true}, {math.Inf(-1), true}} {
		q := "q" + time.Now().Format("150405.000000000")
		if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "")}); err != nil {
			t.Fatal(err)
		}
		ids, _ := rdb.ZRange(ctx, l.StateKey(q, ledger.Pending), 0, -1).Result()
		rdb.ZAdd(ctx, l.StateKey(q, ledger.Pending), redis.Z{Score: c.score, Member: ids[0]})
		d, err := l.FirstDue(ctx, []string{q})
		if err != nil {
			t.Fatal(err)
		}
		if (d[0] == 0) != c.due || d[0] < 0 {
			t.Errorf("score %v: first due in %v; want due %v", c.score, d[0], c.due)
		}
	}
}
