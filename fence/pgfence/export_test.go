package pgfence

// SetRelayHook sets the hook Relay runs between a batch's enqueue and its
// removal from the outbox, and returns a function that clears it.
func SetRelayHook(f func() error) (restore func()) {
	relayHook = f
	return func() { relayHook = nil }
}
