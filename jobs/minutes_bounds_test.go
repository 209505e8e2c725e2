package jobs_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
)

// TestMinutesAtTheEndsOfTime: Minutes over a range reaching the ends of
// the millisecond clock returns the kept minutes up to its end, in one
// bounded read, instead of walking past the last millisecond forever.
func TestMinutesAtTheEndsOfTime(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	if _, err := c.Enqueue(ctx, rangeArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
	insp := c.Inspector()
	now, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end := time.UnixMilli(math.MaxInt64)
	for name, r := range map[string][2]time.Time{
		"now to the last millisecond":           {now, end},
		"the zero time to the last millisecond": {{}, end},
		"the zero time to now":                  {{}, now},
	} {
		done := make(chan error, 1)
		var ms []jobs.MinuteCounts
		go func() {
			var err error
			ms, err = insp.Minutes(ctx, jobs.DefaultQueue, r[0], r[1])
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("%s: Minutes has not returned after %v", name, testsignal.Timeout())
		}
		if r[1].Equal(now) && len(ms) != 1 {
			t.Errorf("%s: %d minutes, want the enqueue's one", name, len(ms))
		}
	}
}
