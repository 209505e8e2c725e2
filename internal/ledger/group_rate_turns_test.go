package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestGroupsSharingARateTakeTurns: groups whose jobs share a rate limit
// still take turns. Group A's 50 jobs are claimed while the rate allows
// one start an hour: a head its rate defers stays its group's head, so A
// holds the rate's next starts for at most one claim's batch of jobs, and
// group B's job, enqueued next, is due behind those, not behind A's whole
// backlog (49 jobs, two days, when each claim deferred one more of A's).
func TestGroupsSharingARateTakeTurns(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "grate"})
	const q, batch = "q", 10
	job := func(id, g string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Group: g,
			Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: time.Hour}}
	}
	var a []*ledger.NewJob
	for i := range 50 {
		a = append(a, job(fmt.Sprintf("a%02d", i), "A"))
	}
	if _, err := l.Insert(ctx, a); err != nil {
		t.Fatal(err)
	}
	// claim as a pool does, until nothing is due
	drain := func() {
		for range 100 {
			r, err := l.Claim(ctx, q, "p", time.Hour, batch)
			if err != nil {
				t.Fatal(err)
			}
			if r.DueIn != 0 {
				return
			}
		}
		t.Fatal("the queue is still due after 100 claims")
	}
	drain()
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("b", "B")}); err != nil {
		t.Fatal(err)
	}
	drain()
	at, err := rdb.ZScore(ctx, "grate:{q}:pending", "b").Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := rdb.ZCount(ctx, "grate:{q}:pending", "-inf", fmt.Sprintf("(%d", int64(at))).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ahead > batch {
		t.Fatalf("B's job is due at %v behind %d of A's jobs, want at most one claim's batch (%d)", time.UnixMilli(int64(at)), ahead, batch)
	}
	// A job of A enqueued now is due before A's deferred head: it leads,
	// the head waits in the group's index. Every pending job is in the due
	// index or its group's, once.
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("a-late", "A")}); err != nil {
		t.Fatal(err)
	}
	drain()
	due, _ := rdb.ZCard(ctx, "grate:{q}:pending").Result()
	own, _ := rdb.ZCard(ctx, "grate:{q}:group:A").Result()
	if due+own != 51 { // a00 started; 50 of A's and B's job pending
		t.Fatalf("%d due and %d in A's index, want 51 pending in all", due, own)
	}
	c, err := l.Counts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if c[ledger.Pending] != 51 {
		t.Fatalf("counts %v, want 51 pending", c)
	}
}
