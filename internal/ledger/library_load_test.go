package ledger

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
)

// TestLibraryLoads: the ledger's function library compiles on Redis. A
// library that does not (Lua's limits: 200 locals, 60 upvalues per
// function) is only logged once elsewhere: every call falls back to the
// plain scripts, several times slower.
func TestLibraryLoads(t *testing.T) {
	rdb, _ := redistest.New(t)
	if err := rdb.FunctionLoadReplace(context.Background(), ledgerLib.Code()).Err(); err != nil {
		t.Fatalf("the ledger's function library does not load: %v", err)
	}
}
