package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestLapsedClaimDoesNotRunWithANewResourceToken: a worker frozen between
// its claim and the resource lease (here: its last confirmation is older
// than the lease TTL) gets the resource's newest token when it wakes, so it
// must not run the handler with it.
func TestLapsedClaimDoesNotRunWithANewResourceToken(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := NewPool(rdb, Config{Jobs: jobs.Config{Namespace: ns}, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := ledger.Claimed{ID: "j1", Queue: "default", Token: 7, Kind: "k", Resource: "account:1"}
	fresh := p.newAttempt(context.Background(), c, time.Now())
	defer fresh.end()
	if !p.acquireResource(fresh, "k") {
		t.Fatal("a fresh claim could not take a free resource")
	}
	_ = p.leases.Release(context.Background(), fresh.resLease)

	// Woken just past the local deadline, before the watchdog cancelled
	// the attempt (here its cancel does nothing): the check after the
	// acquisition refuses.
	frozen := &attempt{job: ledger.Claimed{ID: "j2", Queue: "default", Token: 8, Kind: "k", Resource: "account:1"}}
	frozen.owner, frozen.resource = p.cfg.WorkerID+"/j2", "account:1"
	frozen.ctx, frozen.cancel = context.WithCancelCause(context.Background())
	frozen.log = jobLog{l: p.log, job: &frozen.job}
	frozen.local.Start(time.Now().Add(-2*time.Second), p.cfg.LeaseTTL, p.margin, func(error) {}, errLocalDeadline) // claimed two TTLs ago, never confirmed since
	defer frozen.end()
	if p.acquireResource(frozen, "k") {
		t.Fatal("a lapsed claim went on to run its handler with the resource's newest token")
	}
	if frozen.resLease == nil {
		t.Fatal("the lease taken must be kept for the completer to release")
	}
	_ = p.leases.Release(context.Background(), frozen.resLease)

	// Woken later: the watchdog, measuring from the claim's send time, has
	// cancelled the attempt, and no lease is taken.
	late := p.newAttempt(context.Background(), ledger.Claimed{ID: "j3", Queue: "default", Token: 9, Kind: "k", Resource: "account:1"},
		time.Now().Add(-2*time.Second))
	defer late.end()
	select {
	case <-late.ctx.Done():
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the watchdog did not cancel an attempt claimed two TTLs ago")
	}
	if cause := context.Cause(late.ctx); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("lapsed attempt cancelled with %v, want lease.ErrLost", cause)
	}
	if p.acquireResource(late, "k") || late.resLease != nil {
		t.Fatal("a lapsed, cancelled attempt took the resource lease")
	}
}

type lapsedArgs struct{}

func (lapsedArgs) Kind() string { return "lapsed" }

// TestLapsedClaimDoesNotStartTheHandler: an attempt whose claim lapsed
// before its handler started (a worker frozen between its claim and the
// handler; its watchdog cancelled it) does not start the handler with a
// context already cancelled: its job is put back, its attempt not
// consumed, instead of ending uncertain without having run.
func TestLapsedClaimDoesNotStartTheHandler(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := NewPool(rdb, Config{Jobs: jobs.Config{Namespace: ns}, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := Register(p, jobs.WorkFunc[lapsedArgs](func(context.Context, *jobs.Job[lapsedArgs]) error {
		ran = true
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	late := p.newAttempt(context.Background(), ledger.Claimed{ID: "j1", Queue: "default", Token: 9, Kind: "lapsed", Payload: []byte(`{}`)},
		time.Now().Add(-2*time.Second))
	defer late.end()
	select {
	case <-late.ctx.Done():
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the watchdog did not cancel an attempt claimed two TTLs ago")
	}
	f := p.runAttempt(late)
	if ran {
		t.Error("the handler ran under a lapsed claim")
	}
	if !f.outcome.Defer {
		t.Errorf("outcome %+v, want the job put back (Defer)", f.outcome)
	}
}

// TestLapsedAttemptIsNotRenewed: a process frozen past an attempt's local
// deadline may run its renewer before the watchdog cancels the handler;
// that round must not extend the lease the handler is about to be told it
// lost. A confirmed attempt is renewed.
func TestLapsedAttemptIsNotRenewed(t *testing.T) {
	rdb, ns := redistest.New(t)
	p, err := NewPool(rdb, Config{Jobs: jobs.Config{Namespace: ns}, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	attemptAt := func(id string, claimed time.Time) *attempt {
		a := &attempt{job: ledger.Claimed{ID: id, Queue: "default", Token: 8, Kind: "k"}}
		a.ctx, a.cancel = context.WithCancelCause(context.Background())
		a.local.Start(claimed, p.cfg.LeaseTTL, p.margin, func(error) {}, errLocalDeadline) // its cancel does nothing: the watchdog has not run
		t.Cleanup(a.end)
		return a
	}
	now := time.Now()
	if fresh := attemptAt("j1", now); !fresh.renewing(now) {
		t.Fatal("an attempt claimed now is not renewed")
	}
	if frozen := attemptAt("j2", now.Add(-2*time.Second)); frozen.renewing(now) {
		t.Fatal("an attempt past its local deadline, not cancelled yet, is renewed")
	}
}
