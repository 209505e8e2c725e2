package redisfence_test

import (
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestExampleLeavesNoKeys: the example runs against the Redis at
// REDIS_ADDR, often a developer's own, and removes every key it wrote
// there, the operation's claims key included.
func TestExampleLeavesNoKeys(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	t.Setenv("REDIS_ADDR", srv.Addr)
	Example()
	n, err := redistest.CountKeys(t.Context(), srv.Client())
	if err != nil || n != 0 {
		t.Fatalf("the example left %d key(s) (%v)", n, err)
	}
}
