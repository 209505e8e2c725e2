package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestHistoryOfAnUnknownJobIsNotFound: the timeline of an id no job has
// is ErrNotFound, not an empty timeline, on a plain and a partitioned
// queue; a known job's timeline is found.
func TestHistoryOfAnUnknownJobIsNotFound(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	in := c.Inspector()
	if h, err := in.History(ctx, "default", res.JobID); err != nil || len(h) == 0 {
		t.Fatalf("known job: %v, %v", h, err)
	}
	for _, q := range []string{"default", "nobody-here"} {
		if h, err := in.History(ctx, q, "no-such-job"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("queue %s: History of an unknown id = %v, %v; want ErrNotFound", q, h, err)
		}
	}
}
