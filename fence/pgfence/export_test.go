package pgfence

import "github.com/fencedq/fencedq/internal/testsignal"

// InitListening makes o signal each LISTEN its Listen puts in place, to
// tb's test; call it before Listen runs.
func (o *Outbox) InitListening(tb testsignal.TB) *testsignal.Signal[struct{}] {
	o.listening.Init(tb, "outbox LISTEN in place")
	return &o.listening
}

// SetRelayHook sets the hook Relay runs between a batch's enqueue and its
// removal from the outbox, and returns a function that clears it.
func SetRelayHook(f func() error) (restore func()) {
	relayHook = f
	return func() { relayHook = nil }
}

// SetPruneBatch sets how many records one PruneEffects statement deletes,
// and returns a function that restores it.
func SetPruneBatch(n int) (restore func()) {
	old := pruneBatch
	pruneBatch = n
	return func() { pruneBatch = old }
}

// Channel returns the NOTIFY channel o LISTENs on.
func (o *Outbox) Channel() string { return o.channel }
