package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type retriedArgs struct{}

func (retriedArgs) Kind() string { return "retried" }

// TestRetryDelayThatPanicsOrGoesNegative: a Config.RetryDelay that panics
// (a table of delays indexed past its end) does not bring the pool down:
// the retry is scheduled by the default delay and the panic is logged with
// the job id; a negative delay retries at once. Both jobs are retried
// until they succeed.
func TestRetryDelayThatPanicsOrGoesNegative(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	delays := []time.Duration{-time.Hour}
	cfg.RetryDelay = func(n int) time.Duration { return delays[n-1] } // panics from retry 2
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[retriedArgs](func(_ context.Context, j *jobs.Job[retriedArgs]) error {
		if j.Attempt < 3 {
			return errors.New("try again")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(retriedArgs{})
	ctx := context.Background()
	var rec *jobs.Record
	redistest.AwaitWithin(t, e.rdb, e.ns, "the job to succeed on its third attempt", 10*time.Second, func() bool {
		var err error
		rec, err = e.client.Inspector().Get(ctx, jobs.DefaultQueue, res.JobID)
		return err == nil && rec.State == jobs.Succeeded
	})
	if rec.Attempts != 3 {
		t.Errorf("%d attempts, want 3", rec.Attempts)
	}
	if !strings.Contains(e.logs.String(), "RetryDelay panicked") || !strings.Contains(e.logs.String(), res.JobID) {
		t.Errorf("the panicking RetryDelay was not logged with the job id:\n%s", tail(e.logs.String(), 10))
	}
}
