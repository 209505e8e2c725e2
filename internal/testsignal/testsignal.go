// Package testsignal lets tests wait for something to happen instead of
// sleeping or polling for it.
//
// A [Signal] is a buffered channel that code under test sends into and a
// test receives from. Production code can carry one as a hook: until a test
// calls [Signal.Init], [Signal.Signal] is a nil check and nothing else, so
// an uninitialised hook costs nothing and never blocks.
//
//	type hooks struct{ flushed testsignal.Signal[int] }
//	...
//	c.hooks.flushed.Signal(len(batch)) // in the component
//	...
//	c.hooks.flushed.Init(t)            // in the test, before starting it
//	n := c.hooks.flushed.WaitOrTimeout()
//
// Every wait is bounded by [Timeout]: a failure bound, generous so that a
// slow or loaded machine never trips it, and never a statement about how
// fast anything should be. FENCEDQ_TEST_TIMEOUT_SCALE multiplies it (and
// every bound passed through [Scale]) for slower machines.
//
// The package imports no test framework: production code may import it.
package testsignal

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// ScaleEnv names the environment variable that multiplies every bound
// (a positive number, for example 3 or 0.5; default 1).
const ScaleEnv = "FENCEDQ_TEST_TIMEOUT_SCALE"

// DefaultTimeout is the unscaled bound of a wait.
const DefaultTimeout = 10 * time.Second

// bufferSize is how many signals a Signal holds. Past it the oldest are
// dropped, so a hook that fires all along (a poll loop) keeps the newest.
const bufferSize = 1000

// TB is the part of testing.TB a signal uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Scale returns d multiplied by FENCEDQ_TEST_TIMEOUT_SCALE. An unset,
// malformed or non-positive value counts as 1.
func Scale(d time.Duration) time.Duration {
	f, err := strconv.ParseFloat(os.Getenv(ScaleEnv), 64)
	if err != nil || f <= 0 {
		return d
	}
	return time.Duration(float64(d) * f)
}

// Timeout returns the bound of a wait: DefaultTimeout, scaled.
func Timeout() time.Duration { return Scale(DefaultTimeout) }

// Signal carries values of type T from the code under test to a test. The
// zero value is ready to use and inert: Signal discards values until Init.
type Signal[T any] struct {
	ch      chan T
	tb      TB
	name    string
	dropped atomic.Int64
}

// Init makes s deliver values to tb's test. name says what a signal means
// ("claim handled"); failures quote it. Init must happen before the code
// that signals starts (before its goroutine is started, for example).
func (s *Signal[T]) Init(tb TB, name string) {
	tb.Helper()
	s.ch = make(chan T, bufferSize)
	s.tb, s.name = tb, name
}

// Signal sends v to the test without ever blocking: a no-op before Init
// (and on a nil *Signal, so an optional hook can be a pointer). With the
// buffer full, the oldest value is dropped to make room.
func (s *Signal[T]) Signal(v T) {
	if s == nil || s.ch == nil {
		return
	}
	for {
		select {
		case s.ch <- v:
			return
		default:
		}
		select {
		case <-s.ch:
			s.dropped.Add(1)
		default:
		}
	}
}

// WaitOrTimeout returns the next value, failing the test if none arrives
// within Timeout.
func (s *Signal[T]) WaitOrTimeout() T {
	s.mustInit()
	s.tb.Helper()
	return s.WaitOrTimeoutN(1)[0]
}

// WaitOrTimeoutN returns the next n values, failing the test if they do not
// all arrive within Timeout.
func (s *Signal[T]) WaitOrTimeoutN(n int) []T {
	s.mustInit()
	s.tb.Helper()
	bound := Timeout()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	out := make([]T, 0, n)
	for len(out) < n {
		select {
		case v := <-s.ch:
			out = append(out, v)
		case <-timer.C:
			s.tb.Fatalf("testsignal: waited %v for %d %q signal(s), got %d%s", bound, n, s.name, len(out), s.droppedNote())
		}
	}
	return out
}

// WaitFor receives values until one satisfies ok and returns it, failing
// the test if none does within Timeout. Values before it are discarded.
func (s *Signal[T]) WaitFor(what string, ok func(T) bool) T {
	s.mustInit()
	s.tb.Helper()
	bound := Timeout()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	seen := 0
	for {
		select {
		case v := <-s.ch:
			if ok(v) {
				return v
			}
			seen++
		case <-timer.C:
			s.tb.Fatalf("testsignal: waited %v for a %q signal with %s; %d others arrived%s", bound, s.name, what, seen, s.droppedNote())
			var zero T
			return zero
		}
	}
}

// Drain discards and returns every value delivered so far.
func (s *Signal[T]) Drain() []T {
	s.mustInit()
	s.tb.Helper()
	var out []T
	for {
		select {
		case v := <-s.ch:
			out = append(out, v)
		default:
			return out
		}
	}
}

// RequireEmpty fails the test if a value was delivered and not received.
func (s *Signal[T]) RequireEmpty() {
	s.mustInit()
	s.tb.Helper()
	select {
	case v := <-s.ch:
		s.tb.Fatalf("testsignal: want no %q signal, got %s", s.name, describe(v))
	default:
	}
}

func (s *Signal[T]) mustInit() {
	if s.ch == nil {
		panic("testsignal: wait on a signal that was never initialised (call Init first)")
	}
}

func (s *Signal[T]) droppedNote() string {
	if n := s.dropped.Load(); n > 0 {
		return fmt.Sprintf(" (%d older signals were dropped: more than %d piled up)", n, bufferSize)
	}
	return ""
}

func describe(v any) string { return fmt.Sprintf("%+v", v) }

// Changes tells a test that state it watches has changed (a counter, a
// log), so the test can wait for a condition on that state without polling
// it. Like a Signal, the zero value is inert until Init: Notify is then a
// nil check.
type Changes struct {
	ch   chan struct{}
	tb   TB
	name string
}

// Init makes c deliver notifications to tb's test; name says what changes
// ("the helper's output").
func (c *Changes) Init(tb TB, name string) {
	tb.Helper()
	c.ch = make(chan struct{}, 1)
	c.tb, c.name = tb, name
}

// Notify says the state changed. It never blocks; notifications that
// arrive while one is pending are merged into it.
func (c *Changes) Notify() {
	if c == nil || c.ch == nil {
		return
	}
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// Await evaluates cond now and again after each notification until it
// holds, failing the test with what in the message if it does not within
// Timeout. The state cond reads must be changed before Notify is called.
func (c *Changes) Await(what string, cond func() bool) {
	c.mustInit()
	c.tb.Helper()
	c.AwaitWithin(what, DefaultTimeout, cond)
}

// AwaitWithin is Await with bound (scaled by Scale) instead of the
// default, for a path known to take longer; the caller says why.
func (c *Changes) AwaitWithin(what string, bound time.Duration, cond func() bool) {
	c.mustInit()
	c.tb.Helper()
	if cond() {
		return
	}
	bound = Scale(bound)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case <-c.ch:
			if cond() {
				return
			}
		case <-timer.C:
			if cond() {
				c.tb.Fatalf("testsignal: %s became true without a notification of %s", what, c.name)
			}
			c.tb.Fatalf("testsignal: waited %v for %s (watching %s)", bound, what, c.name)
		}
	}
}

func (c *Changes) mustInit() {
	if c.ch == nil {
		panic("testsignal: wait on Changes that were never initialised (call Init first)")
	}
}
