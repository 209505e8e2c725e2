package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencedq/fencedq/internal/watchdog"
)

// Session keeps a lease alive in the background. Its Context is cancelled,
// with a cause matching ErrLost, as soon as the lease is lost or cannot be
// confirmed before its local deadline (acquire or last renew send time +
// TTL - safety margin). Work done under the lease should use that context.
type Session struct {
	renew  func(ctx context.Context) error
	ttl    time.Duration
	margin time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	m      *Manager
	local  watchdog.Watchdog // cancels ctx at the local deadline

	mu    sync.Mutex
	lease Lease
}

// errLocalDeadline is the cause when no renew was confirmed in time.
var errLocalDeadline = fmt.Errorf("%w: not confirmed before the local deadline", ErrLost)

// KeepAlive starts renewing l every ttl/3 until ctx ends, Stop is called or
// the lease is lost. l is copied; read the current state with Session.Lease.
// A lease last acquired or renewed for another ttl (or built by hand) is
// renewed for ttl before KeepAlive returns, and an error doing so is
// returned (ErrLost when it ended meanwhile): the session's deadlines count
// from a confirmation for ttl, so a lease held for longer is not reported
// lost by the shorter ttl's deadline.
// A Config.SafetyMargin above half of ttl is refused with ErrInvalid.
func (m *Manager) KeepAlive(ctx context.Context, l *Lease, ttl time.Duration) (*Session, error) {
	if err := m.err(); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: nil lease", ErrInvalid)
	}
	if err := validate(l.Resource, l.Owner, ttl); err != nil {
		return nil, err
	}
	if err := watchdog.CheckMargin(ttl, m.cfg.SafetyMargin); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cur := *l
	// A lease built by hand, or acquired (or renewed) for another ttl, is
	// renewed for ttl first: the session's local deadline and its first
	// renewal count from there, neither past the lease's end in Redis (a
	// shorter ttl) nor long before it (a longer one, held for a while,
	// whose deadline for ttl may have passed already).
	if cur.sent.IsZero() || cur.ttl != ttl {
		if err := m.Renew(ctx, &cur, ttl); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &Session{
		ttl: ttl, margin: watchdog.Margin(ttl, m.cfg.SafetyMargin), ctx: sctx, cancel: cancel,
		done: make(chan struct{}), m: m, lease: cur,
	}
	s.renew = func(ctx context.Context) error {
		cur := s.Lease()
		if err := m.Renew(ctx, &cur, ttl); err != nil {
			return err
		}
		s.mu.Lock()
		s.lease = cur
		s.mu.Unlock()
		return nil
	}
	go s.run(cur.sent)
	return s, nil
}

// Context returns a context cancelled when the lease is lost (cause matches
// ErrLost), when Stop is called, or when the parent context ends.
func (s *Session) Context() context.Context { return s.ctx }

// Done is closed once the session stopped renewing.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the lease is held, else why the session ended.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Lost reports whether the session ended because the lease was lost.
func (s *Session) Lost() bool { return errors.Is(s.Err(), ErrLost) }

// Lease returns a snapshot of the lease with its latest deadline.
func (s *Session) Lease() Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// errStopped is the cause when the owner stops the session itself.
var errStopped = errors.New("lease: keep-alive stopped")

// Stop ends renewing without releasing and waits for the renew loop to exit.
func (s *Session) Stop() {
	s.cancel(errStopped)
	<-s.done
}

// Release stops renewing and frees the lease if it is still held. It is
// only available on sessions started by Manager.KeepAlive.
func (s *Session) Release(ctx context.Context) error {
	s.Stop()
	if s.m == nil {
		return fmt.Errorf("%w: session has no lease to release", ErrInvalid)
	}
	l := s.Lease()
	return s.m.Release(ctx, &l)
}

// run renews the lease confirmed at confirmed until the session ends.
func (s *Session) run(confirmed time.Time) {
	defer close(s.done)
	// The watchdog fires at the local deadline unless a renew moved it.
	s.local.Start(confirmed, s.ttl, s.margin, s.cancel, errLocalDeadline)
	defer s.local.Stop()
	every := s.ttl / 3
	next := confirmed.Add(every)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(s.ctx, s.local.Deadline().Add(s.margin/2))
		err := s.renew(rctx)
		cancel()
		switch {
		case err == nil:
			s.local.Confirm(sent)
			next = sent.Add(every)
		case errors.Is(err, ErrLost):
			s.cancel(err)
			return
		case s.ctx.Err() != nil:
			return
		default: // transient: retry soon; the watchdog bounds how long
			next = time.Now().Add(min(every/4+time.Millisecond, 100*time.Millisecond))
		}
	}
}
