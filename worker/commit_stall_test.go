package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type stallArgs struct{}

func (stallArgs) Kind() string { return "stall" }

// A Redis that stalls for longer than the completer's minimum retry time
// (5 s) but less than the attempt's lease still takes the commit: the
// completer retries while the lease is held, so the job succeeds by its
// own commit instead of ending uncertain and going through the
// reconciler.
func TestCommitOutlastsAStallWithinTheLease(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.LeaseTTL = 20 * time.Second // renewed every ~6.7 s: a lease outlives the 7 s stall
	cfg.HandlerTimeout = time.Minute
	p := e.pool(cfg)
	started, release := make(chan struct{}), make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[stallArgs](func(ctx context.Context, _ *jobs.Job[stallArgs]) error {
		close(started)
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(stallArgs{})
	<-started
	admin := srv.Client()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "7000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	close(release) // the handler succeeds while Redis stalls
	rec := jobstest.WaitStateWithin(t, e.ledger, "default", res.JobID, jobs.Succeeded, time.Minute)
	h, err := e.ledger.History(context.Background(), "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 1 || strings.Contains(jobstest.History(h), "uncertain") {
		t.Fatalf("the commit did not outlast the stall: %d attempts, history:\n%s", rec.Attempts, jobstest.History(h))
	}
	if strings.Contains(e.logs.String(), "commit failed with an unknown result") {
		t.Fatal("the completer gave up within the lease")
	}
}
