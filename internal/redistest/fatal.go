package redistest

import (
	"fmt"
	"runtime"
	"testing"
)

// FatalCatcher is a testing.TB whose Fatalf sends its message to Msg and
// ends the calling goroutine, as testing.T's does. The tests of the wait
// helpers run a wait that is meant to fail on a goroutine of its own with
// one, and check what the failure says.
type FatalCatcher struct {
	testing.TB
	Msg chan string
}

// NewFatalCatcher returns a FatalCatcher over tb.
func NewFatalCatcher(tb testing.TB) *FatalCatcher {
	return &FatalCatcher{TB: tb, Msg: make(chan string, 1)}
}

// Helper does nothing: the caught failure is never reported as tb's.
func (f *FatalCatcher) Helper() {}

// Fatalf sends the message to f.Msg and ends the calling goroutine.
func (f *FatalCatcher) Fatalf(format string, args ...any) {
	f.Msg <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}
