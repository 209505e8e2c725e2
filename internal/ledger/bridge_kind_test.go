package ledger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestDeliveryOfAnotherKindWritesNothing: a delivery naming a bridged job
// of another kind is refused (ErrInvalid) whatever the job's state, before
// the claim's other answers and writes: a finished job's duplicate (its
// history and stats) and a running one's lease are left as they were.
func TestDeliveryOfAnotherKindWritesNothing(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	f := newFixture(t, rdb)
	done := f.deliver("done", time.Minute)
	if c := f.complete(done.Claimed, ledger.Outcome{To: jobs.Succeeded}); !c.Applied {
		t.Fatalf("complete: %+v", c)
	}
	f.deliver("live", time.Minute)
	for _, id := range []string{"done", "live"} {
		before, hist, stats := f.snapshot(id)
		_, err := f.l.ClaimDelivery(f.ctx, f.q, ledger.Delivery{ID: id, Kind: "sms:send", Payload: []byte(`{}`), MaxRetries: 3,
			Owner: "asynq-2", TTL: time.Minute, Bridge: "asynq"})
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("delivery of kind sms:send naming job %s of kind email:send: %v, want ErrInvalid", id, err)
		}
		after, hist2, stats2 := f.snapshot(id)
		if after != before || hist2 != hist || stats2 != stats {
			t.Fatalf("job %s changed: %s, %d history entries, stats %s; was %s, %d, %s", id, after, hist2, stats2, before, hist, stats)
		}
	}
}

// snapshot describes job id's record, its history's length and the
// queue's stats.
func (f *fixture) snapshot(id string) (rec string, hist int, stats string) {
	f.t.Helper()
	r, err := f.l.Get(f.ctx, f.q, id)
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := f.l.History(f.ctx, f.q, id)
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := f.l.Stats(f.ctx, f.q)
	if err != nil {
		f.t.Fatal(err)
	}
	return fmt.Sprintf("%s token %d attempts %d owner %s deadline %v", r.State, r.Token, r.Attempts, r.Owner, r.Deadline), len(h), fmt.Sprint(s)
}
