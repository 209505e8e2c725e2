package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestDueRunningOfNoneOrFewerIsNone: AllDueRunning and DueRunning with a
// limit of 0 or below return no jobs, instead of panicking (AllDueRunning
// cut its candidates to a negative length).
func TestDueRunningOfNoneOrFewerIsNone(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, noteArgs{}); err != nil {
		t.Fatal(err)
	}
	insp := c.Inspector()
	at := time.Now().Add(time.Hour)
	for _, limit := range []int{0, -1} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("AllDueRunning(limit %d) panicked: %v", limit, r)
				}
			}()
			recs, err := insp.AllDueRunning(ctx, at, limit)
			if err != nil || len(recs) != 0 {
				t.Errorf("AllDueRunning(limit %d): %d jobs, %v; want none", limit, len(recs), err)
			}
			recs, err = insp.DueRunning(ctx, jobs.DefaultQueue, at, limit)
			if err != nil || len(recs) != 0 {
				t.Errorf("DueRunning(limit %d): %d jobs, %v; want none", limit, len(recs), err)
			}
		}()
	}
}
