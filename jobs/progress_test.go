package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// Progress is fenced by the attempt's token: the running attempt's reports
// are recorded, a stale attempt's (one a newer attempt took over from, or
// one that ended) are refused with ErrStale and change nothing.
func TestProgressFenced(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	res, err := client.Enqueue(ctx, countArgs{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	q, id := res.Queue, res.JobID
	get := func() *jobs.Record {
		t.Helper()
		r, err := client.Inspector().Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	if err := jobs.Progress(ctx, 1, 2, "x"); !errors.Is(err, jobs.ErrNoAttempt) {
		t.Fatalf("Progress outside an attempt: %v, want ErrNoAttempt", err)
	}
	first, err := l.ClaimJob(ctx, q, id, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, _ := ledger.WithAttempt(ctx, l, q, id, first.Token)
	for _, bad := range []struct {
		done, total int64
		note        string
	}{{-1, 0, ""}, {0, -1, ""}, {5, 4, ""}, {1, 2, strings.Repeat("n", jobs.MaxProgressNote+1)}, {1, 2, "a\x00b"}, {1, 2, "\xff"}} {
		if err := jobs.Progress(ctx1, bad.done, bad.total, bad.note); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Progress(%d, %d, %q) = %v, want ErrInvalid", bad.done, bad.total, bad.note, err)
		}
	}
	if r := get(); r.Progress != nil {
		t.Fatalf("invalid reports were recorded: %+v", r.Progress)
	}
	if err := jobs.Progress(ctx1, 1, 4, "batch 1 of 4"); err != nil {
		t.Fatal(err)
	}
	p := get().Progress
	if p == nil || p.Done != 1 || p.Total != 4 || p.Note != "batch 1 of 4" || p.Attempt != 1 || p.Token != first.Token || p.At.IsZero() {
		t.Fatalf("progress = %+v, want 1 of 4 by attempt 1, token %d", p, first.Token)
	}

	// The first attempt ends in a retry; a second attempt takes the job.
	if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: first.Token, Outcome: ledger.Outcome{To: ledger.Pending, Error: "retry"}}}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Progress(ctx1, 2, 4, "after the end"); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("progress of an ended attempt: %v, want ErrStale", err)
	}
	second, err := l.ClaimJob(ctx, q, id, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, _ := ledger.WithAttempt(ctx, l, q, id, second.Token)
	if err := jobs.Progress(ctx2, 3, 0, "second attempt"); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Progress(ctx1, 4, 4, "stale"); !errors.Is(err, jobs.ErrStale) {
		t.Fatalf("progress of the stale attempt: %v, want ErrStale", err)
	}
	p = get().Progress
	if p == nil || p.Done != 3 || p.Total != 0 || p.Note != "second attempt" || p.Attempt != 2 || p.Token != second.Token {
		t.Fatalf("progress = %+v, want the second attempt's 3 (total unknown)", p)
	}
}
