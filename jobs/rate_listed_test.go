package jobs_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestLimitsListsARateOnceAJobIsDeferred: Inspector.Limits lists a rate
// limit from the claim that defers a job by it, not before: a window that
// filled without deferring a job is not listed (the claim writes nothing
// for a start that was never deferred), and README and the docs say so
// instead of promising every full window.
func TestLimitsListsARateOnceAJobIsDeferred(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for i := range 3 {
		if _, err := c.Enqueue(ctx, rangeArgs{N: i}, jobs.Rate("api:x", 2, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if res, err := l.Claim(ctx, jobs.DefaultQueue, "w", time.Minute, 2); err != nil || len(res.Jobs) != 2 {
		t.Fatalf("claim: %+v, %v; want 2 jobs", res, err)
	}
	st, err := c.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rates) != 0 {
		t.Fatalf("a full window with no deferred job is listed: %+v", st.Rates)
	}
	if res, err := l.Claim(ctx, jobs.DefaultQueue, "w", time.Minute, 1); err != nil || len(res.Jobs) != 0 {
		t.Fatalf("claim: %+v, %v; want the third job deferred", res, err)
	}
	st, err = c.Inspector().Limits(ctx, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rates) != 1 || st.Rates[0].Starts != 2 || st.Rates[0].Deferred != 1 {
		t.Fatalf("rates after a deferral: %+v, want api:x with 2 starts and 1 deferred", st.Rates)
	}

	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	if strings.Contains(text, "rates with deferred jobs or a full window") {
		t.Error("README.md says the Limits page lists every rate whose window is full")
	}
	if !strings.Contains(text, "a rate whose window filled without deferring a job is not listed") {
		t.Error("README.md does not say a full window with no deferred job is not listed")
	}
}
