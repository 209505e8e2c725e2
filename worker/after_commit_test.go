package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// TestAfterCommitTellsWhatBecameOfTheOutcome: a middleware learns, once
// the pool tried the commit, whether the ledger applied the outcome its
// attempt asked for (with the state recorded) or refused it (here the
// job's record went away under the attempt): JobView.Outcome alone says
// succeeded for both. A JobView made up outside a pool registers nothing.
func TestAfterCommitTellsWhatBecameOfTheOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	got := make(chan [2]any, 2) // job id, Commit
	cfg.Middleware = []worker.Middleware{func(next worker.Handler) worker.Handler {
		return func(ctx context.Context, job worker.JobView) error {
			if !job.AfterCommit(func(c worker.Commit) { got <- [2]any{job.ID(), c} }) {
				t.Error("AfterCommit refused during the attempt's call")
			}
			return next(ctx, job)
		}
	}}
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, j *jobs.Job[plainArgs]) error {
		if j.Args.N == 1 {
			return e.rdb.Del(ctx, e.ledger.JobKey(j.Queue, j.ID)).Err()
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	gone, kept := e.enqueue(plainArgs{N: 1}), e.enqueue(plainArgs{N: 2})
	want := map[string]worker.Commit{
		gone.JobID: {Refused: true},
		kept.JobID: {Applied: true, State: jobs.Succeeded},
	}
	for range 2 {
		var r [2]any
		select {
		case r = <-got:
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("AfterCommit not called for %v", want)
		}
		id, c := r[0].(string), r[1].(worker.Commit)
		if c.Refused {
			c.State = "" // the ledger's word for a record gone
		}
		if w, ok := want[id]; !ok || c != w {
			t.Errorf("job %s: AfterCommit got %+v, want %+v", id, c, w)
		}
		delete(want, id)
	}
	if (worker.JobView{}).AfterCommit(func(worker.Commit) { t.Error("called for a made-up JobView") }) {
		t.Error("AfterCommit registered on a JobView made up outside a pool")
	}
}
