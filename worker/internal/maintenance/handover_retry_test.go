package maintenance

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestEveryFailedSettleIsKeptForTheNextPass: a pass keeps every workflow
// whose SettleWorkflow call failed, with the call's mark, however many
// failed (a Redis outage fails them all): a call may have written its
// marks, which only a retry with the same mark counts, so one left to the
// next full pass's new mark would never be counted started or finished.
func TestEveryFailedSettleIsKeptForTheNextPass(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	ns := redistest.Namespace(t)
	f := newFixtureOn(t, rdb, ns, jobs.Config{Namespace: ns})
	h := f.leader(f.config()).handover
	_ = rdb.Close() // every call fails at once

	const n = 10_001 // more than a pass once kept
	todo := make([]ledger.WorkflowRef, n)
	marks := make(map[ledger.WorkflowRef]string, n)
	for i := range todo {
		todo[i] = ledger.WorkflowRef{Home: "a", ID: "wf" + strconv.Itoa(i)}
		marks[todo[i]] = h.mark()
	}
	h.settle(f.ctx, todo, marks)
	if len(h.retry) != n {
		t.Fatalf("%d of %d failed settles kept for the next pass", len(h.retry), n)
	}
	for r, m := range marks {
		if h.retry[r] != m {
			t.Fatalf("workflow %s kept with mark %q, want its failed call's %q", r.ID, h.retry[r], m)
		}
	}
}
