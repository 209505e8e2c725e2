package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type dueRetryFarArgs struct{ N int }

func (dueRetryFarArgs) Kind() string { return "due_retry_far_ahead" }

// TestRetryPutOffFarAheadIsNotRepaired: a handler that asks for its retry
// two years ahead (jobs.RetryAfter) has its job scored there while its
// run_at stays as enqueued; the maintenance leader's repair of far-scored
// due-index entries must leave it there, not run it again at once. A job
// whose entry was edited to +inf, put back by the same pass, shows the
// pass ran.
func TestRetryPutOffFarAheadIsNotRepaired(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := jobs.DefaultQueue
	cfg := e.config()
	cfg.Maintenance.PruneInterval = 20 * time.Millisecond
	p := e.pool(cfg)
	var mu sync.Mutex
	ran := map[int]int{}
	first := make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[dueRetryFarArgs](func(_ context.Context, j *jobs.Job[dueRetryFarArgs]) error {
		mu.Lock()
		ran[j.Args.N]++
		n := ran[j.Args.N]
		mu.Unlock()
		if j.Args.N == 0 && n == 1 {
			close(first)
			return jobs.RetryAfter(errors.New("the partner opens in two years"), 2*365*24*time.Hour)
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	later := e.enqueue(dueRetryFarArgs{N: 0})
	stop := e.start(p)
	<-first
	jobstest.WaitState(t, e.ledger, q, later.JobID, jobs.Pending) // the retry committed
	due := e.ledger.StateKey(q, jobs.Pending)
	score, err := e.rdb.ZScore(ctx, due, later.JobID).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ahead := time.Until(time.UnixMilli(int64(score))); ahead < 366*24*time.Hour {
		t.Fatalf("the retry is due in %v, want two years", ahead)
	}
	edited := e.enqueue(dueRetryFarArgs{N: 1}, jobs.RunAt(time.Now().Add(time.Hour)))
	if err := e.rdb.Do(ctx, "ZADD", due, "+inf", edited.JobID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ledger.JobKey(q, edited.JobID), "run_at", "1").Err(); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, q, edited.JobID, jobs.Succeeded)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if ran[0] != 1 {
		t.Fatalf("the job whose retry was put off two years ran %d times, want once", ran[0])
	}
	if s, err := e.rdb.ZScore(ctx, due, later.JobID).Result(); err != nil || s != score {
		t.Fatalf("the retry put off two years is scored %v (%v), was %v: the repair moved it", s, err, score)
	}
}
