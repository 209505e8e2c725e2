package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestTicksWhoseReplyIsLostAreRecordedOnce: a scheduler pass's record of
// its ticks whose reply was lost (the server wrote it) is not sent again
// behind the caller's back, which appended the ticks twice and counted
// them, and the skipped ones, twice: the call fails, the record holds them
// once.
func TestTicksWhoseReplyIsLostAreRecordedOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	l := ledger.New(p.Client(nil), ledger.Config{Namespace: ns})
	ctx := context.Background()
	if _, err := l.RegisterSchedule(ctx, 10, jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", Kind: "report", Queue: "default"}); err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC)
	lost := p.DropReply("job-7401")
	err := l.RecordTicks(ctx, "nightly", 10, ledger.TickRecord{
		Ticks: []jobs.Tick{{Time: tick, JobID: "job-7401", Queue: "default"}}, Cursor: tick, Skipped: 2})
	if err == nil {
		t.Error("RecordTicks with a lost reply: no error, want a network error")
	}
	<-lost
	s, err := l.Schedule(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := l.ScheduleTicks(ctx, "nightly", 10)
	if err != nil {
		t.Fatal(err)
	}
	if s.Enqueued != 1 || s.Skipped != 2 || len(ticks) != 1 {
		t.Errorf("schedule after one record: enqueued %d, skipped %d, %d ticks; want 1, 2, 1", s.Enqueued, s.Skipped, len(ticks))
	}
}
