package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type backoffArgs struct{}

func (backoffArgs) Kind() string { return "backoff" }

// TestRetryRunAtIsItsDueTime: a job waiting out its retry backoff reads
// (Inspector.Get) as due when its retry is, not when it was enqueued, so
// the dashboard's "Run at" and its Run now button, which go by RunAt, do not
// show it due while no pool may start it for an hour.
func TestRetryRunAtIsItsDueTime(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.RetryDelay = func(int) time.Duration { return time.Hour }
	p := e.pool(cfg)
	failed := make(chan struct{}, 1)
	if err := worker.Register(p, jobs.WorkFunc[backoffArgs](func(context.Context, *jobs.Job[backoffArgs]) error {
		failed <- struct{}{}
		return errors.New("gateway down")
	})); err != nil {
		t.Fatal(err)
	}
	stop := e.start(p)
	res := e.enqueue(backoffArgs{})
	<-failed
	ctx := context.Background()
	var rec *jobs.Record
	redistest.Await(t, e.rdb, e.ledger.JobKey("default", res.JobID), "the job back to pending after one attempt", func() bool {
		r, err := e.client.Inspector().Get(ctx, "default", res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		rec = r
		return r.State == jobs.Pending && r.Attempts == 1
	})
	stop()
	if wait := rec.RunAt.Sub(rec.Created); wait < 59*time.Minute || wait > 61*time.Minute {
		t.Fatalf("a job retried in an hour reads RunAt %v, %v after its creation %v", rec.RunAt, wait, rec.Created)
	}
	// run-now makes it due at once, and RunAt says so
	if _, err := e.client.RunNow(ctx, "default", res.JobID, "alice", "gateway back"); err != nil {
		t.Fatal(err)
	}
	r, err := e.client.Inspector().Get(ctx, "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r.RunAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after run-now RunAt is %v", r.RunAt)
	}
}
