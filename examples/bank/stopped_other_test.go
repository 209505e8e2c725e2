//go:build !linux

package bank_test

import "time"

// waitStopped gives SIGSTOP time to take effect in every thread. Only Linux
// tells a parent when its child's group stop is complete (waitid); this
// pause is the fallback elsewhere, generous for an idle machine.
func waitStopped(int) error {
	time.Sleep(200 * time.Millisecond)
	return nil
}
