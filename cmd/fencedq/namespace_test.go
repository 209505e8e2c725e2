package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestBadNamespaceExitsTwoBeforeConnecting: every command that reads or
// writes the ledger refuses an invalid --namespace as bad usage (exit 2,
// naming the flag) before it connects, as it refuses an invalid --queue:
// the dashboard does not start serving, and a workflow listing does not
// print an empty table.
func TestBadNamespaceExitsTwoBeforeConnecting(t *testing.T) {
	e := newOperatorEnv(t)
	bad := []string{"--namespace", "bad ns{x}", "--redis", e.url}
	for _, args := range [][]string{
		{"dashboard", "--addr", "127.0.0.1:0"},
		{"enqueue", "--kind", "k", "--args", "{}", "--unchecked"},
		{"inspect", "--state", "pending"},
		{"inspect", "--job", "x"},
		{"resolve", "--job", "x", "--decision", "rerun", "--actor", "a", "--note", "n"},
		{"cancel", "--job", "x", "--actor", "a", "--note", "n"},
		{"run-now", "--job", "x", "--actor", "a", "--note", "n"},
		{"pause", "--queue", "q", "--actor", "a", "--note", "n"},
		{"resume", "--queue", "q", "--actor", "a", "--note", "n"},
		{"queues"},
		{"partitions", "--queue", "q"},
		{"pools"},
		{"schedules"},
		{"workflow", "inspect"},
		{"workflow", "cancel", "--id", "x", "--actor", "a", "--note", "n"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, append(args, bad...), &out, &errb)
		cancel()
		if code != 2 || !strings.Contains(errb.String(), "--namespace") {
			t.Errorf("%v: code %d, stdout %q, stderr %q (want 2, naming --namespace)", args, code, out.String(), errb.String())
		}
	}
}

// TestPartitionsOfAnUnusedQueueSaysSo: partitions --queue names a queue no
// job or pool has used (a typo shows one partition otherwise, as a real
// queue would), as queues and inspect do; a used queue gets no note.
func TestPartitionsOfAnUnusedQueueSaysSo(t *testing.T) {
	e := newOperatorEnv(t)
	e.enqueue()
	code, out, errOut := e.cli("partitions", "--queue", "defualt")
	if code != 0 || !strings.Contains(out, "no job or pool has used queue defualt") {
		t.Errorf("partitions of an unused queue: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.cli("partitions", "--queue", "default")
	if code != 0 || strings.Contains(out, "no job or pool has used") {
		t.Errorf("partitions of a used queue: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}
