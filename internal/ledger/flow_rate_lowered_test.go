package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestRateLoweredWithABacklogDefersByTheBacklogsStarts: jobs deferred by a
// rate of 1 per 10 ms (their backlog starts within 200 ms), then a job
// enqueued after a deployment lowered the rate to 1 per day. The new job
// is due a day after the backlog's last start, the earliest its own window
// allows; not a day per job deferred before it (20 days here), which
// counted each fast job as taking a whole period of the new rate.
func TestRateLoweredWithABacklogDefersByTheBacklogsStarts(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rlow"})
	const q = "q"
	job := func(id string, per time.Duration) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "api:x", RateMax: 1, RatePer: per}}
	}
	dueAt := func(id string) time.Time {
		t.Helper()
		ms, err := rdb.ZScore(ctx, "rlow:{q}:pending", id).Result()
		if err != nil {
			t.Fatalf("%s in the due index: %v", id, err)
		}
		return time.UnixMilli(int64(ms))
	}
	var fast []*ledger.NewJob
	for i := range 20 {
		fast = append(fast, job(fmt.Sprintf("fast-%02d", i), 10*time.Millisecond))
	}
	if _, err := l.Insert(ctx, fast); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, q, "p", time.Hour, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("daily", 24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	now, err := l.ReadTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim(ctx, q, "p", time.Hour, 100); err != nil {
		t.Fatal(err)
	}
	if at := dueAt("daily"); at.After(now.Add(24*time.Hour + time.Minute)) {
		t.Fatalf("the daily job is due at %v, %v from now: behind a day per fast job deferred before it", at, at.Sub(now))
	}

}
