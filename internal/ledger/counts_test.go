package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// CountsOf reads many queues in one go: each queue's counts match Counts
// of that queue alone (pending includes grouped jobs waiting their turn and
// jobs parked on a full limit), groups are counted, and a queue whose key
// has the wrong type fails alone.
func TestCountsOfManyQueues(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	enqueue := func(q string, opts ...jobs.Option) {
		t.Helper()
		if _, err := c.Enqueue(ctx, noteArgs{Text: "x"}, append(opts, jobs.Queue(q))...); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		enqueue("plain")
	}
	for i := range 5 {
		enqueue("grouped", jobs.Group([]string{"a", "b"}[i%2]))
	}
	for range 3 {
		enqueue("limited", jobs.Limit("acct", 1))
	}
	// A claim of the limited queue starts one job and parks the other two.
	if res, err := l.Claim(ctx, "limited", "w", time.Minute, 10); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("claim of the limited queue: %+v, %v", res, err)
	}
	if err := rdb.Set(ctx, l.StateKey("broken", jobs.Pending), "not a zset", 0).Err(); err != nil {
		t.Fatal(err)
	}

	qs := []string{"plain", "grouped", "limited", "broken", "empty"}
	cs, err := l.CountsOf(ctx, qs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pending, running, groups int64
	}{{3, 0, 0}, {5, 0, 2}, {2, 1, 0}, {}, {0, 0, 0}}
	for i, q := range qs {
		got := cs[i]
		if q == "broken" {
			if got.Err == nil || !strings.Contains(got.Err.Error(), "WRONGTYPE") {
				t.Fatalf("broken queue: %+v, want its WRONGTYPE error", got)
			}
			continue
		}
		if got.Err != nil || got.Jobs[jobs.Pending] != want[i].pending || got.Jobs[jobs.Running] != want[i].running || got.Groups != want[i].groups {
			t.Fatalf("queue %s: %+v, want pending %d running %d groups %d", q, got, want[i].pending, want[i].running, want[i].groups)
		}
		one, err := l.Counts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for s, n := range one {
			if got.Jobs[s] != n {
				t.Fatalf("queue %s state %s: CountsOf %d, Counts %d", q, s, got.Jobs[s], n)
			}
		}
	}
	if _, err := l.Counts(ctx, "broken"); err == nil {
		t.Fatal("Counts of the broken queue: no error")
	}
}
