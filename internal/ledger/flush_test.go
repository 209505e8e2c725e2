package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A flush (or a restart without persistence) loses a running attempt, its
// token and the epoch record on the same primary. The job enqueued again
// (by its producer, from a source of truth) is claimed with a token above
// the lost attempt's, whatever the clock says after the flush, so a zombie
// still running the lost attempt is fenced off by storage.
func TestAttemptAfterFlushAboveTheLostOne(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	claim := func() uint64 {
		t.Helper()
		if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, "j1")}); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 1)
		if err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		return uint64(r.Jobs[0].Token)
	}
	zombie := claim()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(-10 * time.Minute)
	if tok := claim(); tok <= zombie {
		t.Fatalf("token after the flush %d, not above the lost attempt's %d", tok, zombie)
	}
}
