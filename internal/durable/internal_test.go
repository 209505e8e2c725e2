package durable

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/redistest"
)

// COMMAND INFO's reply: an entry for a known command, nil for an unknown.
func TestKnowsReadsCommandInfo(t *testing.T) {
	if !knows([]any{[]any{"waitaof", int64(4)}}) {
		t.Error("an entry read as unknown")
	}
	if knows([]any{nil}) || knows(nil) {
		t.Error("nil read as known")
	}
}

// A Waiter using WAITAOF reads its two-element reply; a server that
// answers otherwise (here Redis 7.0: unknown command) leaves the write
// unacknowledged, never silently acknowledged.
func TestWaitAOFReplyChecked(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	has, err := HasWaitAOF(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	w := New(c, Options{Replicas: 1, Timeout: 20 * time.Millisecond, AOF: true}, nil)
	w.cmd = WaitAOF // as if detected
	pipe := c.Pipeline()
	pipe.Incr(ctx, "k")
	check := w.Append(ctx, pipe)
	_, _ = pipe.Exec(ctx)
	err = check()
	if !errors.Is(err, ErrUnacknowledged) {
		t.Fatalf("WAITAOF without a replica: %v, want ErrUnacknowledged", err)
	}
	if !has && !strings.Contains(err.Error(), "WAITAOF") {
		t.Fatalf("on a server without WAITAOF the error should name it: %v", err)
	}
}
