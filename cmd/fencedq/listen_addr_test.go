package main

import (
	"strings"
	"testing"
)

// TestDashboardMalformedAddrIsBadUsage: an --addr that is no listen
// address (a port out of range, no port) is bad usage, exit 2 like any
// other bad flag, not a runtime failure (exit 1); it is named, and it is
// reported before Redis is contacted (an unreachable Redis does not hide
// it).
func TestDashboardMalformedAddrIsBadUsage(t *testing.T) {
	for _, addr := range []string{"bad:99999", "127.0.0.1", "127.0.0.1:-1", "127.0.0.1:port-that-is-no-service"} {
		code, out, errOut := runCLI(t, "dashboard", "--addr", addr, "--redis", "127.0.0.1:1", "--log-level", "error")
		if code != 2 || out != "" || !strings.Contains(errOut, "--addr") || strings.Contains(errOut, "does not answer") {
			t.Errorf("--addr %q: code %d, stdout %q, stderr %q (want 2, an error naming --addr, before Redis)", addr, code, out, errOut)
		}
	}
}
