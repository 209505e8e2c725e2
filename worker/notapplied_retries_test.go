package worker_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type neverAnsweredArgs struct{}

func (neverAnsweredArgs) Kind() string { return "always-hangs" }

// neverAnsweredWorker's dependency never answers: every attempt runs until its
// deadline. Its Reconcile finds each one not applied.
type neverAnsweredWorker struct{ calls atomic.Int32 }

func (w *neverAnsweredWorker) Work(ctx context.Context, _ *jobs.Job[neverAnsweredArgs]) error {
	w.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (w *neverAnsweredWorker) Reconcile(context.Context, *jobs.Job[neverAnsweredArgs]) (jobs.Verdict, error) {
	return jobs.NotApplied, nil
}

// TestNotAppliedSpendsAttempts: an attempt left uncertain (its deadline
// passed) that the reconciler finds not applied is a failed attempt: the
// job is retried after the pool's RetryDelay while it has attempts left,
// and goes dead once they are spent, as a job whose handler returned an
// error does. A handler whose dependency always hangs must not loop
// uncertain, not applied, pending, run, forever.
func TestNotAppliedSpendsAttempts(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	var mu sync.Mutex
	var delays []int
	cfg.RetryDelay = func(n int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		delays = append(delays, n)
		return 10 * time.Millisecond
	}
	p := e.pool(cfg)
	w := &neverAnsweredWorker{}
	if err := worker.Register[neverAnsweredArgs](p, w); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(neverAnsweredArgs{}, jobs.MaxRetries(2), jobs.Timeout(50*time.Millisecond))
	rec := jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Dead)
	if rec.Attempts != 3 || w.calls.Load() != 3 {
		t.Errorf("job dead after %d attempts (%d handler calls), want 3: MaxRetries 2", rec.Attempts, w.calls.Load())
	}
	if !strings.Contains(rec.Reason, "not applied") || !strings.Contains(rec.Reason, "retries exhausted") {
		t.Errorf("reason %q, want one saying the last attempt was found not applied and its attempts are spent", rec.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(delays, []int{1, 2}) {
		t.Errorf("RetryDelay asked for retries %v, want [1 2]: a retry after a not-applied attempt waits its backoff", delays)
	}
}

// TestNotAppliedHistorySaysRetryAndDead: the history of a job whose
// attempts the reconciler found not applied says what each verdict did (a
// retry while attempts were left, dead once they were spent), not a bare
// "rerun", and the retry is counted in the retried stat as a failed
// attempt's retry is.
func TestNotAppliedHistorySaysRetryAndDead(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryDelay = func(int) time.Duration { return 10 * time.Millisecond }
	p := e.pool(cfg)
	if err := worker.Register[neverAnsweredArgs](p, &neverAnsweredWorker{}); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	r := e.enqueue(neverAnsweredArgs{}, jobs.MaxRetries(1), jobs.Timeout(50*time.Millisecond))
	jobstest.WaitState(t, e.ledger, "default", r.JobID, jobs.Dead)
	h, err := e.ledger.History(context.Background(), "default", r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range h {
		if en.Event == "resolve" {
			got = append(got, en.Decision+":"+en.Outcome)
		}
	}
	if want := []string{"rerun:retry", "rerun:dead"}; !slices.Equal(got, want) {
		t.Errorf("resolve entries (decision:outcome) %q, want %q", got, want)
	}
	st, err := e.ledger.Stats(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if st["retried"] != 1 || st["dead"] != 1 {
		t.Errorf("retried %d, dead %d; want 1 and 1 (one retry after a not-applied attempt, then dead)", st["retried"], st["dead"])
	}
}
