package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
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

	mu        sync.Mutex
	lease     Lease
	confirmed time.Time // local send time of the last confirmed acquire or renew
}

// KeepAlive starts renewing l every ttl/3 until ctx ends, Stop is called or
// the lease is lost. l is copied; read the current state with Session.Lease.
func (m *Manager) KeepAlive(ctx context.Context, l *Lease, ttl time.Duration) (*Session, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil lease", ErrInvalid)
	}
	if err := validate(l.Resource, l.Owner, ttl); err != nil {
		return nil, err
	}
	cur := *l
	if cur.sent.IsZero() { // a lease built by hand: confirm it first
		if err := m.Renew(ctx, &cur, ttl); err != nil {
			return nil, err
		}
	}
	s := newSession(ctx, ttl, m.cfg.SafetyMargin, cur.sent)
	s.m, s.lease = m, cur
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
	go s.run()
	return s, nil
}

func newSession(ctx context.Context, ttl, margin time.Duration, confirmed time.Time) *Session {
	if margin <= 0 {
		margin = max(ttl/10, 10*time.Millisecond)
	}
	if margin >= ttl/2 {
		margin = ttl / 2
	}
	sctx, cancel := context.WithCancelCause(ctx)
	return &Session{ttl: ttl, margin: margin, ctx: sctx, cancel: cancel, done: make(chan struct{}), confirmed: confirmed}
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

func (s *Session) localDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed.Add(s.ttl - s.margin)
}

func (s *Session) run() {
	defer close(s.done)
	// The watchdog fires at the local deadline unless a renew moved it.
	watchdog := time.AfterFunc(time.Until(s.localDeadline()), func() {
		s.cancel(fmt.Errorf("%w: not confirmed before the local deadline", ErrLost))
	})
	defer watchdog.Stop()
	every := s.ttl / 3
	s.mu.Lock()
	next := s.confirmed.Add(every)
	s.mu.Unlock()
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(s.ctx, s.localDeadline().Add(s.margin/2))
		err := s.renew(rctx)
		cancel()
		switch {
		case err == nil:
			s.mu.Lock()
			s.confirmed = sent
			s.mu.Unlock()
			watchdog.Reset(time.Until(s.localDeadline()))
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
