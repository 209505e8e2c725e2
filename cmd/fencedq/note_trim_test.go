package main

import (
	"context"
	"strings"
	"testing"
)

// TestOperatorNoteIsTrimmed: the CLI records an operator's note as the
// dashboard does, surrounding spaces and line feeds trimmed; a note that
// fits once trimmed is taken.
func TestOperatorNoteIsTrimmed(t *testing.T) {
	e := newOperatorEnv(t)
	if code, out, errOut := e.cli("pause", "--queue", "default", "--actor", "alice", "--note", "  deploy 42 \n"); code != 0 {
		t.Fatalf("pause: %d %q %q", code, out, errOut)
	}
	p, err := e.client.Inspector().Paused(context.Background(), "default")
	if err != nil || p == nil || p.Note != "deploy 42" {
		t.Fatalf("pause recorded %+v %v: want the note trimmed", p, err)
	}
	long := strings.Repeat("n", 2000) + "\n"
	if code, out, errOut := e.cli("resume", "--queue", "default", "--actor", "alice", "--note", long); code != 0 {
		t.Fatalf("resume with a 2000-byte note and a line feed: %d %q %.200q", code, out, errOut)
	}
}
