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
	m      *Manager
	ttl    time.Duration
	margin time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu    sync.Mutex
	lease Lease
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
	margin := m.cfg.SafetyMargin
	if margin <= 0 {
		margin = max(ttl/10, 10*time.Millisecond)
	}
	if margin >= ttl/2 {
		margin = ttl / 2
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &Session{m: m, ttl: ttl, margin: margin, ctx: sctx, cancel: cancel, done: make(chan struct{}), lease: *l}
	go s.run()
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

// Release stops renewing and frees the lease if it is still held.
func (s *Session) Release(ctx context.Context) error {
	s.Stop()
	l := s.Lease()
	return s.m.Release(ctx, &l)
}

func (s *Session) localDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease.sent.IsZero() {
		return time.Now() // unknown send time: must confirm at once
	}
	return s.lease.sent.Add(s.lease.ttl - s.margin)
}

func (s *Session) run() {
	defer close(s.done)
	// The watchdog fires at the local deadline unless a renew moved it.
	watchdog := time.AfterFunc(time.Until(s.localDeadline()), func() {
		s.cancel(fmt.Errorf("%w: not confirmed before the local deadline", ErrLost))
	})
	defer watchdog.Stop()
	every := s.ttl / 3
	next := time.Now()
	if !s.lease.sent.IsZero() {
		next = s.lease.sent.Add(every)
	}
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		l := s.Lease()
		rctx, cancel := context.WithDeadline(s.ctx, s.localDeadline().Add(s.margin/2))
		err := s.m.Renew(rctx, &l, s.ttl)
		cancel()
		switch {
		case err == nil:
			s.mu.Lock()
			s.lease = l
			s.mu.Unlock()
			watchdog.Reset(time.Until(s.localDeadline()))
			next = l.sent.Add(every)
		case errors.Is(err, ErrLost):
			s.cancel(err)
			return
		default: // transient: retry soon; the watchdog bounds how long
			next = time.Now().Add(min(every/4+time.Millisecond, 100*time.Millisecond))
		}
	}
}
