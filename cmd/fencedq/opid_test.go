package main

import (
	"context"
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

// TestEmptyOperationIDIsBadUsage: --op given empty is refused as bad
// usage (exit 2) before anything is done, never read as "not given": an
// enqueue does not generate an id (and enqueue a job a retry of the same
// command would not deduplicate), inspect does not list instead.
func TestEmptyOperationIDIsBadUsage(t *testing.T) {
	e := newOperatorEnv(t)
	for _, args := range [][]string{
		{"enqueue", "--kind", "bank.transfer", "--args", "{}", "--unchecked", "--op", ""},
		{"inspect", "--state", "pending", "--op", ""},
		{"resolve", "--job", "j1", "--op", "", "--decision", "dead", "--actor", "alice"},
	} {
		code, out, errOut := e.cli(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--op") {
			t.Errorf("%q: code %d, stdout %q, stderr %q (want 2, an error about --op)", args, code, out, errOut)
		}
	}
	ov, err := e.client.Inspector().Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ov) != 0 {
		t.Fatalf("queues after refused commands: %+v, want none", ov)
	}
}
