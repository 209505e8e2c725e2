package testsignal_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/testsignal"
)

// fakeTB records failures instead of ending the test, so that a failing
// wait can itself be checked.
type fakeTB struct {
	mu       sync.Mutex
	failed   []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}

// Fatalf records the failure and ends the calling goroutine, as
// testing.T.Fatalf does.
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// failure runs fn in its own goroutine (Fatalf ends it) and returns the
// failure it recorded, or "".
func (f *fakeTB) failure(fn func()) string {
	f.mu.Lock()
	before := len(f.failed)
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failed) == before {
		return ""
	}
	return f.failed[len(f.failed)-1]
}

func TestUninitialisedSignalIsANoOp(t *testing.T) {
	var s testsignal.Signal[int]
	for i := range 2 * 1000 {
		s.Signal(i) // no channel: returns at once, never blocks
	}
	var none *testsignal.Signal[int]
	none.Signal(1) // an optional hook left nil
}

func TestWaitOrTimeoutReceivesInOrder(t *testing.T) {
	var s testsignal.Signal[int]
	s.Init(t, "number")
	go func() {
		for i := range 5 {
			s.Signal(i)
		}
	}()
	if v := s.WaitOrTimeout(); v != 0 {
		t.Fatalf("first value %d, want 0", v)
	}
	if got := s.WaitOrTimeoutN(4); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("next four %v", got)
	}
	s.RequireEmpty()
}

func TestWaitFor(t *testing.T) {
	var s testsignal.Signal[string]
	s.Init(t, "word")
	for _, w := range []string{"a", "bb", "ccc"} {
		s.Signal(w)
	}
	if got := s.WaitFor("three letters", func(w string) bool { return len(w) == 3 }); got != "ccc" {
		t.Fatalf("got %q", got)
	}
	s.RequireEmpty()
}

func TestFullBufferKeepsTheNewest(t *testing.T) {
	var s testsignal.Signal[int]
	s.Init(t, "tick")
	const n = 1500
	for i := range n {
		s.Signal(i) // never blocks, though nobody receives yet
	}
	got := s.Drain()
	if len(got) != 1000 || got[0] != n-1000 || got[len(got)-1] != n-1 {
		t.Fatalf("kept %d values, %d..%d; want the newest 1000", len(got), got[0], got[len(got)-1])
	}
}

func TestTimeoutNamesWhatWasAwaited(t *testing.T) {
	t.Setenv(testsignal.ScaleEnv, "0.001") // 10 ms: this wait is meant to fail
	f := &fakeTB{}
	var s testsignal.Signal[int]
	s.Init(f, "completion flushed")
	s.Signal(1)
	msg := f.failure(func() { s.WaitOrTimeoutN(2) })
	if !strings.Contains(msg, `"completion flushed"`) || !strings.Contains(msg, "got 1") {
		t.Fatalf("failure message %q", msg)
	}
	msg = f.failure(func() { s.RequireEmpty() })
	if msg != "" {
		t.Fatalf("RequireEmpty on an empty signal failed: %q", msg)
	}
	s.Signal(7)
	if msg = f.failure(func() { s.RequireEmpty() }); !strings.Contains(msg, "7") {
		t.Fatalf("RequireEmpty with a value left: %q", msg)
	}
}

func TestScale(t *testing.T) {
	for env, want := range map[string]time.Duration{
		"": 10 * time.Second, "3": 30 * time.Second, "0.5": 5 * time.Second, "-1": 10 * time.Second, "x": 10 * time.Second,
	} {
		t.Setenv(testsignal.ScaleEnv, env)
		if got := testsignal.Timeout(); got != want {
			t.Errorf("%s=%q: Timeout() = %v, want %v", testsignal.ScaleEnv, env, got, want)
		}
	}
}

func TestChangesAwait(t *testing.T) {
	var c testsignal.Changes
	c.Init(t, "the counter")
	var mu sync.Mutex
	n := 0
	go func() {
		for range 100 {
			mu.Lock()
			n++
			mu.Unlock()
			c.Notify() // merged while one is pending; never blocks
		}
	}()
	c.Await("the counter at 100", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return n == 100
	})
	var inert testsignal.Changes
	inert.Notify()
	var none *testsignal.Changes
	none.Notify()
}

func TestChangesFailureNamesWhatWasAwaited(t *testing.T) {
	t.Setenv(testsignal.ScaleEnv, "0.001") // 10 ms: these waits are meant to fail
	f := &fakeTB{}
	var c testsignal.Changes
	c.Init(f, "the log")
	if msg := f.failure(func() { c.Await("a line", func() bool { return false }) }); !strings.Contains(msg, "a line") || !strings.Contains(msg, "the log") {
		t.Fatalf("failure message %q", msg)
	}
	start := time.Now()
	if msg := f.failure(func() {
		c.Await("the clock", func() bool { return time.Since(start) > 5*time.Millisecond })
	}); !strings.Contains(msg, "without a notification") {
		t.Fatalf("failure message %q", msg)
	}
}
