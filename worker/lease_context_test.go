package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
	"github.com/fencedq/fencedq/worker"
)

type leaseArgs struct {
	Account string `json:"account"`
}

func (leaseArgs) Kind() string { return "reads-its-lease" }

// Resource names the lease the worker takes before the handler runs.
func (a leaseArgs) Resource() string { return "account:" + a.Account }

type leaseSeen struct {
	l       *lease.Lease
	ok      bool
	f       fence.Fence
	job     jobs.Job[jobs.JobArgs]
	fenceOK bool
}

// TestHandlerReadsItsLease: the handler's context carries the attempt's
// lease (lease.FromContext): the resource it holds, the owner and the same
// token as the job and its fence.
func TestHandlerReadsItsLease(t *testing.T) {
	if _, ok := lease.FromContext(context.Background()); ok {
		t.Fatal("a context without a lease reports one")
	}
	e := newEnv(t)
	p := e.pool(e.config())
	seen := make(chan leaseSeen, 1)
	if err := worker.Register(p, jobs.WorkFunc[leaseArgs](func(ctx context.Context, j *jobs.Job[leaseArgs]) error {
		l, ok := lease.FromContext(ctx)
		f, fok := fence.FromContext(ctx)
		seen <- leaseSeen{l: l, ok: ok, f: f, fenceOK: fok, job: jobs.Job[jobs.JobArgs]{
			ID: j.ID, Resource: j.Resource, Token: j.Token, Owner: j.Owner}}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(leaseArgs{Account: "a-1"})

	var s leaseSeen
	select {
	case s = <-seen:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not run")
	}
	if !s.ok || s.l == nil {
		t.Fatal("lease.FromContext found no lease in the handler's context")
	}
	if s.job.ID != res.JobID || s.job.Resource != "account:a-1" {
		t.Fatalf("job %+v, want %s on account:a-1", s.job, res.JobID)
	}
	if s.l.Resource != s.job.Resource || s.l.Token != s.job.Token || s.l.Owner != s.job.Owner || s.l.Token == 0 {
		t.Fatalf("lease %+v, job resource %s token %d owner %s", s.l, s.job.Resource, s.job.Token, s.job.Owner)
	}
	if !s.fenceOK || s.f.Token != s.l.Token || s.f.Resource != s.l.Resource {
		t.Fatalf("fence %+v (%v) differs from the lease %+v", s.f, s.fenceOK, s.l)
	}
	if s.l.Deadline.IsZero() {
		t.Fatal("the lease carries no deadline")
	}
}

type outlivesRedisArgs struct{}

func (outlivesRedisArgs) Kind() string { return "outlives-redis" }

// TestUnreachableRedisCancelsAtTheLocalDeadline: with Redis paused no
// renewal is confirmed and no reply says the lease is lost, yet the
// handler's context is cancelled, with a cause matching lease.ErrLost, once
// the attempt's local deadline (last confirmation + LeaseTTL -
// SafetyMargin) passes.
func TestUnreachableRedisCancelsAtTheLocalDeadline(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.SafetyMargin = 100 * time.Millisecond
	p := e.pool(cfg)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	if err := worker.Register(p, jobs.WorkFunc[outlivesRedisArgs](func(ctx context.Context, _ *jobs.Job[outlivesRedisArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	})); err != nil {
		t.Fatal(err)
	}
	e.enqueue(outlivesRedisArgs{})
	e.start(p)
	select {
	case <-started:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not run")
	}
	srv.Pause()
	defer srv.Resume() // before the pool stops
	select {
	case cause := <-causes:
		if !errors.Is(cause, lease.ErrLost) || !strings.Contains(cause.Error(), "local deadline") {
			t.Fatalf("handler's context cancelled with %v, want the local deadline's lease.ErrLost", cause)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler's context outlived its lease while Redis was unreachable")
	}
}

// TestLostLeaseIsNotRenewedAgain: once the ledger says an attempt's lease
// is lost (a newer attempt runs the job), a handler that ignores its
// cancelled context keeps its slot but its lease is not renewed again:
// the rejection is counted once, not once per renewal round for as long
// as the handler runs.
func TestLostLeaseIsNotRenewedAgain(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 600 * time.Millisecond
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	started, causes, release := registerStubborn(t, p)
	job := e.enqueue(plainArgs{})
	e.start(p)
	defer close(release) // before the pool stops
	<-started
	// A newer attempt takes the job over, as after an expiry and a re-run.
	if err := e.rdb.HSet(context.Background(), e.ledger.JobKey("default", job.JobID), "token", "1").Err(); err != nil {
		t.Fatal(err)
	}
	var cause error
	select {
	case cause = <-causes:
		if !errors.Is(cause, lease.ErrLost) {
			t.Fatalf("handler's context cancelled with %v, want lease.ErrLost", cause)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the lost lease did not cancel the handler's context")
	}
	requireNoRenewalAfterLoss(t, hooks.Renewed)
	v := testutil.ToFloat64(e.metric("fencedq_fenced_rejections_total"))
	switch {
	case strings.Contains(cause.Error(), "the ledger says"):
		if v != 1 {
			t.Fatalf("fenced rejections %v, want 1 (the renewal that found the lease lost)", v)
		}
	case v > 1: // a stalled renewer: the local deadline passed first, and no renewal may follow it
		t.Fatalf("fenced rejections %v after the local deadline (%v), want at most 1 (a round in flight then)", v, cause)
	}
}

// TestLocalDeadlineEndsRenewals: once the local deadline cancelled an
// attempt's context (Redis unreachable), its lease is not renewed when
// Redis is back, though its token still runs the job: a handler that
// ignores its cancelled context does not get back a lease it was told it
// lost, and the maintenance leader can take the job over.
func TestLocalDeadlineEndsRenewals(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	e := newEnvOn(t, srv.Client(), redistest.Namespace(t))
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.SafetyMargin = 100 * time.Millisecond
	cfg.Maintenance.Disabled = true // nothing expires the job: a renewal would succeed
	p := e.pool(cfg)
	hooks := worker.InitHooks(p, t)
	started, causes, release := registerStubborn(t, p)
	e.enqueue(plainArgs{})
	e.start(p)
	defer close(release) // before the pool stops
	defer srv.Resume()   // before the pool stops
	select {
	case <-started:
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler did not run")
	}
	srv.Pause()
	select {
	case cause := <-causes:
		if !errors.Is(cause, lease.ErrLost) || !strings.Contains(cause.Error(), "local deadline") {
			t.Fatalf("handler's context cancelled with %v, want the local deadline's lease.ErrLost", cause)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the handler's context outlived its lease while Redis was unreachable")
	}
	srv.Resume()
	requireNoRenewalAfterLoss(t, hooks.Renewed)
}

// requireNoRenewalAfterLoss fails the test unless the renewal rounds after
// an attempt's loss was noted (its context cancelled) leave it alone. The
// rounds that ended before are dropped; the renewer runs one round at a
// time, so only the one in flight when the loss was noted (which may have
// included the attempt) ends after that.
func requireNoRenewalAfterLoss(t *testing.T, renewed *testsignal.Signal[int]) {
	t.Helper()
	renewed.Drain()
	renewed.WaitOrTimeout() // the round in flight, or a later one
	for range 2 {
		if n := renewed.WaitOrTimeout(); n != 0 {
			t.Fatalf("a renewal round after the lease was lost renewed %d attempts, want 0", n)
		}
	}
}

// registerStubborn registers on p a plainArgs handler that signals started,
// sends its context's cause once that is cancelled, then ignores it and
// runs on until release is closed.
func registerStubborn(t *testing.T, p *worker.Pool) (started chan struct{}, causes chan error, release chan struct{}) {
	t.Helper()
	started, causes, release = make(chan struct{}), make(chan error, 1), make(chan struct{})
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, _ *jobs.Job[plainArgs]) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		<-release // ignores its cancelled context
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	return started, causes, release
}
