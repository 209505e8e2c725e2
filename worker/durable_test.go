package worker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// durablePool returns a pool config in durable mode (one replica must hold
// each claim and completion).
func durablePool(e *env) worker.Config {
	cfg := e.config()
	cfg.Jobs.Durability = jobs.Durability{Replicas: 1, Timeout: 100 * time.Millisecond}
	return cfg
}

// A claim that too few replicas acknowledged is not started: the pool puts
// its jobs back (attempt not consumed) and the handler never runs while
// replication is cut; once it heals, the job runs exactly once.
func TestDurableClaimNotAcknowledgedIsNotStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	e := newEnvOn(t, f.Client(), redistest.Namespace(t))
	var runs atomic.Int64
	p := e.pool(durablePool(e))
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		runs.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	hooks := worker.InitHooks(p, t)
	job := e.enqueue(plainArgs{})
	f.Sync()
	f.CutReplication()
	e.start(p)

	ev := hooks.PutBack.WaitFor("the job's claim put back", func(ev worker.PutBackEvent) bool {
		return slices.ContainsFunc(ev.Jobs, func(c ledger.Claimed) bool { return c.ID == job.JobID })
	})
	if !strings.Contains(ev.Reason, "not acknowledged") {
		t.Fatalf("put back for %q, want the unacknowledged claim", ev.Reason)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times on an unacknowledged claim", n)
	}
	// The put-back's log line (done or failed) names the jobs, so an
	// operator can tell which jobs come back through lease expiry.
	if logs := e.logs.String(); !strings.Contains(logs, "put back") || !strings.Contains(logs, job.JobID) {
		t.Fatalf("the put-back's log does not name job %s:\n%s", job.JobID, tail(logs, 5))
	}
	if rec, err := e.ledger.Get(ctx, jobs.DefaultQueue, job.JobID); err != nil || rec.State == jobs.Succeeded {
		t.Fatalf("job after an unacknowledged claim: %+v, %v", rec, err)
	}

	f.HealReplication()
	rec := jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, job.JobID, jobs.Succeeded)
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
	if rec.Attempts != 1 {
		t.Fatalf("job took %d attempts, want 1: the unstarted claims must not consume one", rec.Attempts)
	}
}

// A completion too few replicas acknowledged is retried: it was applied on
// the primary, the retry finds it applied by the same token, waits for the
// replica again (every completion writes, so its wait covers the first
// try's writes) and reports it applied.
func TestDurableCompletionIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	e := newEnvOn(t, f.Client(), redistest.Namespace(t))
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var runs atomic.Int64
	p := e.pool(durablePool(e))
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	hooks := worker.InitHooks(p, t)
	job := e.enqueue(plainArgs{})
	e.start(p)
	<-started
	f.CutReplication()
	close(release)
	// The first try applies on the primary and is not acknowledged.
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, job.JobID, jobs.Succeeded)
	onReplica := ledger.New(f.Replica.Client(), ledger.Config{Namespace: e.ns})
	if rec, err := onReplica.Get(ctx, jobs.DefaultQueue, job.JobID); err != nil || rec.State != jobs.Running {
		t.Fatalf("replica's record while cut: %+v, %v; want running", rec, err)
	}
	hooks.Committed.RequireEmpty()
	f.HealReplication()
	out := hooks.Committed.WaitOrTimeout()
	if len(out) != 1 || !out[0].Applied || out[0].State != jobs.Succeeded {
		t.Fatalf("completion reported %+v, want applied, succeeded", out)
	}
	if rec, err := onReplica.Get(ctx, jobs.DefaultQueue, job.JobID); err != nil || rec.State != jobs.Succeeded {
		t.Fatalf("replica's record after the acknowledged completion: %+v, %v; want succeeded", rec, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
}

// With more replicas asked for than the primary has, every claim and every
// put-back of its jobs runs on the primary unacknowledged. The put-back
// says so: the jobs are pending again on the primary, not waiting for
// their leases to expire.
func TestDurablePutBackNotAcknowledgedSaysTheJobsAreBack(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{}) // no replica at all
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := durablePool(e)
	cfg.Jobs.Durability.Timeout = 20 * time.Millisecond
	p := e.pool(cfg)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		t.Error("handler ran on an unacknowledged claim")
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	hooks := worker.InitHooks(p, t)
	job := e.enqueue(plainArgs{})
	e.start(p)
	hooks.PutBack.WaitFor("the job's claim put back", func(ev worker.PutBackEvent) bool {
		return slices.ContainsFunc(ev.Jobs, func(c ledger.Claimed) bool { return c.ID == job.JobID })
	})
	logs := e.logs.String()
	if strings.Contains(logs, "could not be put back") {
		t.Fatalf("an unacknowledged put-back reported as not done:\n%s", tail(logs, 5))
	}
	if !strings.Contains(logs, "put back without starting; too few replicas acknowledged the put-back") {
		t.Fatalf("no line says the put-back was not acknowledged:\n%s", tail(logs, 5))
	}
}

// A pool refuses a wait for replicas its Redis client's read timeout
// cannot hold (the wait's reply is read under it).
func TestDurableTimeoutBeyondTheReadTimeoutRefusesThePool(t *testing.T) {
	rdb, ns := redistest.New(t)
	_, err := worker.NewPool(rdb, worker.Config{Jobs: jobs.Config{Namespace: ns,
		Durability: jobs.Durability{Replicas: 1, Timeout: 5 * time.Second}}})
	if !errors.Is(err, worker.ErrConfig) || !strings.Contains(err.Error(), "durability: timeout") {
		t.Fatalf("NewPool: %v, want ErrConfig naming the durability timeout", err)
	}
}

// A completion still unacknowledged when a stopping pool gives up is
// named unsettled and logged as what it is: applied on the primary, not
// on enough replicas (it stands unless a failover loses it), not as a
// commit whose result is unknown.
func TestDurableCompletionUnacknowledgedAtShutdownSaysItApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	e := newEnvOn(t, f.Client(), redistest.Namespace(t))
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	p := e.pool(durablePool(e))
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(context.Context, *jobs.Job[plainArgs]) error {
		started <- struct{}{}
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	job := e.enqueue(plainArgs{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	f.CutReplication()
	close(release)
	jobstest.WaitState(t, e.ledger, jobs.DefaultQueue, job.JobID, jobs.Succeeded) // on the primary
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the pool did not stop")
	}
	var se *worker.ShutdownError
	if !errors.As(err, &se) || len(se.Jobs) != 1 || se.Jobs[0].ID != job.JobID {
		t.Fatalf("Run = %v, want a *ShutdownError naming the job", err)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "commit ran on the primary but was not acknowledged by enough replicas") ||
		strings.Contains(logs, "commit failed with an unknown result") {
		t.Fatalf("the unacknowledged commit is not logged as applied on the primary:\n%s", tail(logs, 10))
	}
	// A running pool tries an unacknowledged completion again while the
	// attempt's lease holds, and each failed commit counts: on a loaded
	// machine it fails more than once before the stop.
	if n := failedCommits(t, e.reg, job.Queue, "unacknowledged"); n < 1 {
		t.Errorf("fencedq_commits_failed_total{result=\"unacknowledged\"} = %v, want at least 1", n)
	}
}
