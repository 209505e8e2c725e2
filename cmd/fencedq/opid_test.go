package main

import (
	"strings"
	"testing"
)

// TestInvalidOperationIDIsBadUsage: an --op no enqueue would take (too
// long, control characters) names no job: bad usage (exit 2), refused
// before connecting, the id clipped and escaped in the error.
func TestInvalidOperationIDIsBadUsage(t *testing.T) {
	e := newOperatorEnv(t)
	long := strings.Repeat("x", 5000)
	for _, args := range [][]string{
		{"inspect", "--op", long},
		{"inspect", "--op", "op\x1b[2J", "--queue", "default"},
		{"resolve", "--op", long, "--decision", "dead", "--actor", "alice"},
		{"resolve", "--op", "op\x07", "--queue", "default", "--decision", "rerun", "--actor", "alice"},
	} {
		code, out, errOut := e.cli(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--op") || len(errOut) > 500 || strings.ContainsAny(errOut, "\x1b\x07") {
			t.Errorf("%.60q: code %d, stdout %q, stderr %.300q (want 2, a short escaped error about --op)", args, code, out, errOut)
		}
	}
}
