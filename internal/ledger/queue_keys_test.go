package ledger_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestQueueKeysKeptAcrossCalls: the function library keeps each queue's
// keys across calls (prelude.lua's QUEUE_KEYS). Calls over more queues
// than it keeps, over two namespaces with the same queue names, and across
// the end of a minute each write their own queue's keys and minute.
func TestQueueKeysKeptAcrossCalls(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	a, b := newFixture(t, rdb), newFixture(t, rdb)
	insert := func(f *fixture, q string, n int) {
		t.Helper()
		js := make([]*ledger.NewJob, n)
		for i := range js {
			js[i] = &ledger.NewJob{ID: q + "-" + strconv.Itoa(i), Kind: "note", Queue: q, Payload: []byte("{}")}
		}
		if _, err := f.l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	claimed := func(f *fixture, q string) int {
		t.Helper()
		res, err := f.l.Claim(ctx, q, "w", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			if want := q + "-"; len(j.ID) < len(want) || j.ID[:len(want)] != want {
				t.Errorf("a claim of queue %s took job %s", q, j.ID)
			}
		}
		return len(res.Jobs)
	}
	qs := ledger.QueueKeysKept() + 10
	for i := range qs {
		insert(a, "q"+strconv.Itoa(i), 1)
	}
	insert(b, "q0", 2)
	for _, i := range []int{0, 1, qs - 1} {
		q := "q" + strconv.Itoa(i)
		if n := claimed(a, q); n != 1 {
			t.Errorf("claimed %d jobs of queue %s, want 1", n, q)
		}
	}
	if n := claimed(b, "q0"); n != 2 {
		t.Errorf("claimed %d jobs of the other namespace's q0, want 2", n)
	}
	for _, c := range []struct {
		f    *fixture
		name string
		want int64
	}{{a, "enqueued", 1}, {a, "attempted", 1}, {b, "enqueued", 2}, {b, "attempted", 2}} {
		c.f.q = "q0"
		if got := c.f.stat(c.name); got != c.want {
			t.Errorf("%s's q0 counts %s %d, want %d", c.f.l.Namespace(), c.name, got, c.want)
		}
	}

	// The namespace's time moved past the end of its minute (the clock
	// record's mark: the time goes on from it): the next call counts in
	// the next minute's hash.
	now, err := a.l.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := now.Truncate(time.Minute).Add(time.Minute + time.Second)
	if err := rdb.HSet(ctx, a.l.Namespace()+":epoch", "clk", strconv.FormatInt(next.UnixMicro(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	insert(a, "q0", 1)
	ms, err := a.l.Minutes(ctx, "q0", now.Add(-10*time.Minute), next.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var before, after int64 // the minutes before next's, and next's
	for _, m := range ms {
		if m.At.Before(next.Truncate(time.Minute)) {
			before += m.Counts["enqueued"]
		} else {
			after += m.Counts["enqueued"]
		}
	}
	if before != 1 || after != 1 {
		t.Errorf("enqueued %d before the clock moved to the next minute and %d in it, want 1 and 1", before, after)
	}
}
