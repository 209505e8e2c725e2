package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

// recv receives from c, failing the test naming what after the timeout.
func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("%s: nothing within %v", what, testsignal.Timeout())
		panic("unreachable")
	}
}

// A Redis restarted empty under a running attempt: the attempt is
// cancelled (its job is gone, its lease with it), the loss is detected and
// recorded, and the enqueuing client's re-submission brings the job back,
// which then runs to success; a second re-submission restores nothing.
func TestRestartEmptyUnderARunningAttempt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	client := jobs.NewClient(e.rdb, jobs.Config{Namespace: e.ns, ResubmitOnRewind: true, Registerer: prometheus.NewRegistry()})
	t.Cleanup(func() { _ = client.Close() })
	cfg := e.config()
	poolReg := prometheus.NewRegistry()
	cfg.Registerer = poolReg
	p := e.pool(cfg)
	started := make(chan int, 4)
	cause := make(chan error, 4)
	var first atomic.Bool
	_ = worker.Register(p, jobs.WorkFunc[echoArgs](func(ctx context.Context, j *jobs.Job[echoArgs]) error {
		started <- j.Args.N
		if j.Args.N == 1 && first.CompareAndSwap(false, true) {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
		return nil
	}))
	e.start(p)
	ctx := context.Background()
	res, err := client.Enqueue(ctx, echoArgs{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, started, "first attempt started")
	srv.Restart()
	got := recv(t, cause, "running attempt cancelled")
	if !errors.Is(got, lease.ErrLost) {
		t.Fatalf("attempt cancelled with %v, want lease.ErrLost", got)
	}
	// The client's next call on the queue finds the loss and re-submits.
	if _, err := client.Enqueue(ctx, echoArgs{N: 2}); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitState(t, e.ledger, res.Queue, res.JobID, jobs.Succeeded)
	rs, err := client.Inspector().Rewinds(ctx)
	if err != nil || len(rs) != 1 || rs[0].LostRecorded != 1 || rs[0].Resubmitted != 1 {
		t.Fatalf("recorded rewinds: %+v, %v; want one, its recorded enqueue lost and re-submitted", rs, err)
	}
	// Re-submitting again restores nothing: the job is there once.
	again, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Restored != 0 {
			t.Fatalf("second re-submission restored %+v", r)
		}
	}
	counts, err := client.Inspector().Counts(ctx, res.Queue)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, n := range counts {
		total += n
	}
	if total != 2 {
		t.Fatalf("queue holds %d jobs (%v), want the two enqueued", total, counts)
	}
}
