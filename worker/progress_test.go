package worker_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type progressArgs struct{}

func (progressArgs) Kind() string { return "progress" }

// A pool's handler reports progress through its context; the job's record
// shows the last report, with the attempt that made it.
func TestHandlerReportsProgress(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	reported := make(chan error, 2)
	if err := worker.Register(p, jobs.WorkFunc[progressArgs](func(ctx context.Context, j *jobs.Job[progressArgs]) error {
		reported <- jobs.Progress(ctx, 1, 3, "step 1")
		reported <- jobs.Progress(ctx, 2, 3, "step 2")
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(progressArgs{})
	for range 2 {
		if err := <-reported; err != nil {
			t.Fatalf("Progress in a pool's handler: %v", err)
		}
	}
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	r, err := e.client.Inspector().Get(context.Background(), "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Progress == nil || r.Progress.Done != 2 || r.Progress.Total != 3 || r.Progress.Note != "step 2" ||
		r.Progress.Attempt != 1 || r.Progress.Token != r.Token {
		t.Fatalf("progress = %+v, want 2 of 3 by attempt 1 (token %d)", r.Progress, r.Token)
	}
}
