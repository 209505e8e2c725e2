package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// A finished job's record expires retention after it finished, on the
// namespace's time; the pruner drops its index entry by the same time, so
// a leader whose clock is ahead of that time (here Redis's clock is two
// hours behind the pool's) does not drop the entry of a job still
// retained: it stays listed until its record expires.
func TestPrunerKeepsRetainedJobsWhenTheClocksDisagree(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	srv.SetClockOffset(-2 * time.Hour)
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.Jobs.Retention = time.Hour
	cfg.Maintenance.PruneInterval = 20 * time.Millisecond
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(context.Context, *jobs.Job[echoArgs]) error { return nil }))
	e.start(p)
	res := e.enqueue(echoArgs{N: 1})
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)

	// A stray entry finished long ago on any clock: its removal shows a
	// prune pass ran after the job finished.
	ctx := context.Background()
	done := e.ledger.StateKey(res.Queue, jobs.Succeeded)
	if err := e.rdb.ZAdd(ctx, done, redis.Z{Score: 1, Member: "stray"}).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Await(t, e.rdb, e.ns, "the stray entry pruned", func() bool {
		return e.rdb.ZScore(ctx, done, "stray").Err() == redis.Nil
	})
	if err := e.rdb.ZScore(ctx, done, res.JobID).Err(); err != nil {
		t.Fatalf("the entry of the job finished just now, retained for an hour, was pruned: %v", err)
	}
	if r, err := e.client.Inspector().Get(ctx, res.Queue, res.JobID); err != nil || r.State != jobs.Succeeded {
		t.Fatalf("the job's record: %+v, %v", r, err)
	}
}
