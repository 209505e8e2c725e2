package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// brokenScripts are deliberately wrong copies of ledger scripts, so tests
// can show that their checks catch a ledger that breaks fencing.
var brokenScripts = map[string]struct {
	script   **luafunc.Script
	src, rid string
	old, new string
}{
	// Commits are applied without checking the attempt's token: a stale
	// attempt overwrites the current one's outcome.
	"complete-no-token-check": {&completeScript, completeSrc, "nil",
		"if h[1] ~= 'running' or h[2] ~= token then", "if h[1] ~= 'running' then"},
	// A claim hands out the job's previous token again instead of a higher one.
	"claim-reuse-token": {&claimScript, claimSrc, "ARGV[5]",
		"local stok = mint(last)",
		"local stok = u64_norm(last)\n    if stok == '0' then stok = mint(last) end"},
}

// UseBrokenScript swaps the named script for its broken copy until restore
// is called. Calls must not run concurrently with ledger calls.
func UseBrokenScript(name string) (restore func()) {
	b, ok := brokenScripts[name]
	if !ok {
		panic(fmt.Sprintf("no broken script %q", name))
	}
	if !strings.Contains(b.src, b.old) {
		panic(fmt.Sprintf("broken script %q: the text to replace is gone from the script", name))
	}
	orig := *b.script
	*b.script = standalone(name, b.rid, strings.Replace(b.src, b.old, b.new, 1))
	return func() { *b.script = orig }
}

// standalone builds a ledger script alone in a function library of its own.
func standalone(key, rid, src string) *luafunc.Script {
	key = strings.ReplaceAll(key, "-", "_")
	lib := luafunc.NewLibrary(func() (string, string) {
		name := "fencedq_test_" + key
		return name, library(name, sharedLua, []libScript{{fn: name + "_" + key, rid: rid, src: src}})
	})
	return luafunc.NewScript(lib, key, linkUnits(sharedUnits(rid), src))
}

// ScriptFunction returns the function name by which the named script
// ("claim", "renew", "complete", "enqueue") is called (FCALL's first
// argument).
func ScriptFunction(name string) string {
	return map[string]*luafunc.Script{"claim": claimScript, "renew": renewScript,
		"complete": completeScript, "enqueue": enqueueScript}[name].Function()
}

// HoldHandovers leaves hand-over records where the calls that wrote them
// put them, for an explicit MoveHandovers, until restore is called.
func HoldHandovers() (restore func()) {
	autoMove = false
	return func() { autoMove = true }
}

// ResubmitForTest inserts js as a re-submission after a rewind does.
func (l *Ledger) ResubmitForTest(ctx context.Context, js []*NewJob) ([]*Inserted, error) {
	return l.insert(ctx, js, "resubmit")
}

// PruneBatch is how many index entries one prune call removes at most.
const PruneBatch = pruneBatch

// QueueKeysKept is how many queues' keys the function library keeps
// across calls (prelude.lua's QUEUE_KEYS_MAX).
func QueueKeysKept() int {
	_, v, _ := strings.Cut(prelude, "\nlocal QUEUE_KEYS_MAX = ")
	v, _, _ = strings.Cut(v, "\n")
	n, err := strconv.Atoi(v)
	if err != nil {
		panic("prelude.lua defines no QUEUE_KEYS_MAX")
	}
	return n
}

// UncommittedBatch is uncommittedBatch, for tests filling a batch.
const UncommittedBatch = uncommittedBatch
