package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRunAtLongPastStaysDueAcrossAResubmit: a RunAt centuries past (year
// 1, before what a time.Duration spans from now) is due at once, and so is
// the job a Client.Resubmit restores after a rewind, instead of a due time
// centuries ahead.
func TestRunAtLongPastStaysDueAcrossAResubmit(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	insp := c.Inspector()
	var ids []string
	for _, at := range []time.Time{time.Time{}.Add(time.Second), time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(-1, 0)} {
		ids = append(ids, enqueued(t, c, countArgs{N: at.Year()}, jobs.RunAt(at)).JobID)
	}
	srv.Restart() // every job is lost
	res, err := c.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Restored != len(ids) {
		t.Fatalf("resubmitted %+v, want %d restored", res, len(ids))
	}
	now, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		rec, err := insp.Get(ctx, jobs.DefaultQueue, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != jobs.Pending || rec.RunAt.After(now) {
			t.Errorf("job %s restored %s, due at %v: want due at once (before %v)", id, rec.State, rec.RunAt, now)
		}
	}
}
