package main

import (
	"context"
	"strings"
	"testing"
)

// inspect --job shows the running attempt's latest progress report.
func TestInspectShowsProgress(t *testing.T) {
	e := newOperatorEnv(t)
	id := e.enqueue()
	c := e.claim(id)
	if code, out, _ := e.cli("inspect", "--job", id); code != 0 || strings.Contains(out, "progress") {
		t.Fatalf("inspect before any report: %d %q", code, out)
	}
	if err := e.ledger.ReportProgress(context.Background(), "default", id, c.Token, 3, 10, "batch 3 of 10"); err != nil {
		t.Fatal(err)
	}
	code, out, _ := e.cli("inspect", "--job", id)
	if code != 0 || !strings.Contains(out, "  progress 3 of 10 (30%): batch 3 of 10, attempt 1 at ") {
		t.Fatalf("inspect: %d %q", code, out)
	}
	code, out, _ = e.cli("inspect", "--job", id, "--json")
	if code != 0 || !strings.Contains(out, `"progress":{"done":3,"total":10,"note":"batch 3 of 10","attempt":1,`) {
		t.Fatalf("inspect --json: %d %q", code, out)
	}
}
