package watchdog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
)

var errExpired = errors.New("not confirmed before the local deadline")

func TestMargin(t *testing.T) {
	for _, c := range []struct {
		ttl, margin, want time.Duration
	}{
		{10 * time.Second, 0, time.Second},                   // default: a tenth
		{10 * time.Second, -time.Second, time.Second},        // negative: the default
		{50 * time.Millisecond, 0, MinDefaultMargin},         // default: at least the floor
		{10 * time.Millisecond, 0, 5 * time.Millisecond},     // never more than half the TTL
		{10 * time.Second, 2 * time.Second, 2 * time.Second}, // configured
		{10 * time.Second, 6 * time.Second, 5 * time.Second}, // configured, capped
	} {
		if got := Margin(c.ttl, c.margin); got != c.want {
			t.Errorf("Margin(%v, %v) = %v, want %v", c.ttl, c.margin, got, c.want)
		}
	}
}

// recorder is a context cancelled by a watchdog, counting the cancels and
// noting when the first came.
type recorder struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	calls int
	at    time.Time
}

func newRecorder(t *testing.T) *recorder {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	return &recorder{ctx: ctx, cancel: cancel}
}

func (r *recorder) fire(cause error) {
	r.mu.Lock()
	r.calls++
	if r.calls == 1 {
		r.at = time.Now()
	}
	r.mu.Unlock()
	r.cancel(cause)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// TestFiresWhenNotConfirmed: the timer alone cancels the context, with the
// cause given, once the deadline (confirmed + TTL - margin) has passed.
func TestFiresWhenNotConfirmed(t *testing.T) {
	r := newRecorder(t)
	ttl := 100 * time.Millisecond
	margin := Margin(ttl, 0)
	confirmed := time.Now()
	var w Watchdog
	w.Start(confirmed, ttl, margin, r.fire, errExpired)
	defer w.Stop()
	if got, want := w.Deadline(), confirmed.Add(ttl-margin); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got, want)
	}
	select {
	case <-r.ctx.Done():
	case <-time.After(testsignal.Timeout()):
		t.Fatalf("not cancelled within %v of a %v deadline", testsignal.Timeout(), ttl-margin)
	}
	if cause := context.Cause(r.ctx); !errors.Is(cause, errExpired) {
		t.Fatalf("cause %v, want %v", cause, errExpired)
	}
	if r.at.Before(confirmed.Add(ttl - margin)) {
		t.Fatalf("cancelled %v after the confirmation, before the deadline %v", r.at.Sub(confirmed), ttl-margin)
	}
}

// The tests below drive the check the timer runs with chosen instants,
// under a TTL long enough that the timer itself never fires during a test.

const longTTL = time.Hour

func startLong(t *testing.T, r *recorder, margin time.Duration) (*Watchdog, time.Time) {
	t.Helper()
	w := &Watchdog{}
	c0 := time.Now()
	w.Start(c0, longTTL, Margin(longTTL, margin), r.fire, errExpired)
	t.Cleanup(w.Stop)
	return w, c0
}

// TestMarginHonoured: the watchdog fires at TTL - margin after the last
// confirmation, not a moment before, with the default and with a
// configured margin.
func TestMarginHonoured(t *testing.T) {
	for _, margin := range []time.Duration{0, 20 * time.Minute} {
		r := newRecorder(t)
		w, c0 := startLong(t, r, margin)
		deadline := c0.Add(longTTL - Margin(longTTL, margin))
		if !w.Deadline().Equal(deadline) {
			t.Fatalf("margin %v: deadline %v after the confirmation, want %v", margin, w.Deadline().Sub(c0), deadline.Sub(c0))
		}
		w.check(deadline.Add(-time.Nanosecond))
		if r.count() != 0 {
			t.Fatalf("margin %v: fired before the deadline", margin)
		}
		w.check(deadline)
		if r.count() != 1 || !errors.Is(context.Cause(r.ctx), errExpired) {
			t.Fatalf("margin %v: at the deadline: %d cancels, cause %v", margin, r.count(), context.Cause(r.ctx))
		}
	}
}

// TestConfirmExtends: a confirmation moves the deadline to its send time +
// TTL - margin; an older one does not move it back; after firing, nothing
// changes.
func TestConfirmExtends(t *testing.T) {
	r := newRecorder(t)
	w, c0 := startLong(t, r, 0)
	window := longTTL - Margin(longTTL, 0)
	w.Confirm(c0.Add(10 * time.Minute))
	if got, want := w.Deadline(), c0.Add(10*time.Minute+window); !got.Equal(want) {
		t.Fatalf("deadline %v after the first confirmation, want %v", got.Sub(c0), want.Sub(c0))
	}
	w.Confirm(c0.Add(5 * time.Minute)) // older than the last: ignored
	w.check(c0.Add(window))            // the deadline the timer was armed for
	w.check(c0.Add(10*time.Minute + window - time.Nanosecond))
	if r.count() != 0 {
		t.Fatal("fired although a confirmation moved the deadline")
	}
	w.check(c0.Add(10*time.Minute + window))
	if r.count() != 1 {
		t.Fatalf("%d cancels at the moved deadline, want 1", r.count())
	}
	w.Confirm(c0.Add(2 * longTTL))
	w.check(c0.Add(3 * longTTL))
	if r.count() != 1 {
		t.Fatalf("%d cancels: a watchdog fires once", r.count())
	}
}

// TestStopPreventsFiring: once stopped, the deadline passing cancels
// nothing; a watchdog never started can be stopped.
func TestStopPreventsFiring(t *testing.T) {
	r := newRecorder(t)
	w, c0 := startLong(t, r, 0)
	w.Stop()
	w.check(c0.Add(2 * longTTL))
	if r.count() != 0 || r.ctx.Err() != nil {
		t.Fatal("a stopped watchdog fired")
	}
	var never Watchdog
	never.Stop()
}

// TestGroupFiresEachAtItsDeadline: watchdogs sharing a group's timer each
// fire, with their cause, not before their own deadline (a confirmed one at
// its moved deadline); a stopped one never fires; the heap empties.
func TestGroupFiresEachAtItsDeadline(t *testing.T) {
	var g Group
	const n = 5
	rs := make([]*recorder, n)
	ws := make([]*Watchdog, n)
	starts := make([]time.Time, n)
	margin := 10 * time.Millisecond
	for i := range n {
		rs[i] = newRecorder(t)
		ws[i] = &Watchdog{}
		starts[i] = time.Now()
		// TTLs out of order, so the heap's earliest changes as they come.
		g.Start(ws[i], starts[i], time.Duration(60+40*((i*3)%n))*time.Millisecond, margin, rs[i].fire, errExpired)
	}
	if g.Len() != n {
		t.Fatalf("%d watchdogs in the group, want %d", g.Len(), n)
	}
	ws[1].Stop()
	moved := time.Now().Add(150 * time.Millisecond)
	ws[2].Confirm(moved)
	for i := range n {
		if i == 1 {
			continue
		}
		select {
		case <-rs[i].ctx.Done():
		case <-time.After(testsignal.Timeout()):
			t.Fatalf("watchdog %d not cancelled", i)
		}
		if !errors.Is(context.Cause(rs[i].ctx), errExpired) {
			t.Fatalf("watchdog %d: cause %v", i, context.Cause(rs[i].ctx))
		}
		want := ws[i].Deadline()
		if rs[i].at.Before(want) {
			t.Fatalf("watchdog %d cancelled %v before its deadline", i, want.Sub(rs[i].at))
		}
	}
	if !ws[2].Deadline().Equal(moved.Add(ws[2].window)) {
		t.Fatalf("the confirmed watchdog's deadline did not move")
	}
	if rs[1].count() != 0 {
		t.Fatal("a stopped watchdog in a group fired")
	}
	if g.Len() != 0 {
		t.Fatalf("%d watchdogs left in the group", g.Len())
	}
}

// TestGroupCheckRequeues: a group's watchdog found before its moved
// deadline goes back in the heap; at the deadline it fires once and leaves;
// Stop takes a waiting one out.
func TestGroupCheckRequeues(t *testing.T) {
	var g Group
	r := newRecorder(t)
	w := &Watchdog{}
	c0 := time.Now()
	g.Start(w, c0, longTTL, Margin(longTTL, 0), r.fire, errExpired)
	window := longTTL - Margin(longTTL, 0)
	w.Confirm(c0.Add(time.Minute))
	g.mu.Lock()
	g.h.Pop() // as fire does with a watchdog whose deadline it reached
	g.mu.Unlock()
	w.check(c0.Add(window))
	if r.count() != 0 || g.Len() != 1 {
		t.Fatalf("before the moved deadline: %d cancels, %d in the group", r.count(), g.Len())
	}
	g.mu.Lock()
	g.h.Pop()
	g.mu.Unlock()
	w.check(c0.Add(time.Minute + window))
	if r.count() != 1 || g.Len() != 0 {
		t.Fatalf("at the moved deadline: %d cancels, %d in the group", r.count(), g.Len())
	}
	other := &Watchdog{}
	g.Start(other, c0, longTTL, 0, newRecorder(t).fire, errExpired)
	other.Stop()
	if g.Len() != 0 {
		t.Fatalf("a stopped watchdog stayed in the group")
	}
}
