package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// elector competes for the namespace's leader lease (ledger.LeaderResource)
// among the pools and keeps it while it can. Leading is a context: the
// lease's keep-alive cancels it the moment the lease is lost, and every
// write made under it carries the lease's token, so a leader paused past
// its lease is refused by the ledger.
type elector struct {
	leases *lease.Manager
	owner  string        // the pool's worker id, the lease's owner
	ttl    time.Duration // the leader lease's TTL
	retry  time.Duration // the longest wait between two tries
	log    *slog.Logger
	// gauge is fencedq_maintenance_leader, shared by the pools of a
	// Registerer: each adds 1 while it leads, so one that stops or steps
	// down never zeroes another's leadership.
	gauge prometheus.Gauge
	// tried, when a test initialised it, gets each try's acquire error (nil:
	// this pool became the leader), once the try is over when it failed.
	tried testsignal.Signal[error]
}

// run competes for leadership until ctx ends. Each time this pool becomes
// the leader it calls lead with the leadership's context and token, and
// tries again once lead has returned and the leadership ended.
func (e *elector) run(ctx context.Context, lead func(ctx context.Context, leader lease.Token)) {
	for {
		wait := e.once(ctx, lead)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// once tries to become the leader and, if it does, calls lead (which
// returns once the leadership or ctx ends), then releases the lease. It
// returns how long to wait before trying again: until the current leader's
// lease ends (a dead leader is replaced as soon as its lease lapses), at
// most retry.
func (e *elector) once(ctx context.Context, lead func(ctx context.Context, leader lease.Token)) time.Duration {
	l, err := e.leases.Acquire(ctx, ledger.LeaderResource, e.owner, e.ttl)
	if err != nil {
		defer e.tried.Signal(err)
		var held *lease.HeldError
		if errors.As(err, &held) {
			return min(max(time.Until(held.Deadline), 10*time.Millisecond), e.retry)
		}
		if ctx.Err() == nil {
			e.log.Warn("maintenance leader election failed", "error", err)
		}
		return e.retry
	}
	session, err := e.leases.KeepAlive(ctx, l, e.ttl)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("maintenance leadership could not be kept", "error", err)
		}
		return e.retry
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = session.Release(rctx)
		cancel()
	}()
	e.tried.Signal(nil)
	e.gauge.Inc()
	e.log.Info("this pool is the maintenance leader", "token", l.Token.String())
	lctx := session.Context()
	func() {
		defer e.gauge.Dec()
		lead(lctx, l.Token)
	}()
	if ctx.Err() == nil && lctx.Err() != nil {
		e.log.Warn("maintenance leadership lost", "cause", context.Cause(lctx))
	}
	return e.retry
}
