package ledger

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// brokenScripts are deliberately wrong copies of ledger scripts, so tests
// can show that their checks catch a ledger that breaks fencing.
var brokenScripts = map[string]struct {
	script   **redis.Script
	src      string
	old, new string
}{
	// Commits are applied without checking the attempt's token: a stale
	// attempt overwrites the current one's outcome.
	"complete-no-token-check": {&completeScript, completeSrc,
		"if h[1] ~= 'running' or h[2] ~= token then", "if h[1] ~= 'running' then"},
	// A claim hands out the job's previous token again instead of a higher one.
	"claim-reuse-token": {&claimScript, claimSrc,
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
	*b.script = script(strings.Replace(b.src, b.old, b.new, 1))
	return func() { *b.script = orig }
}

// ScriptSHA returns the SHA1 by which the named script ("claim", "renew",
// "complete", "enqueue") is called.
func ScriptSHA(name string) string {
	return map[string]*redis.Script{"claim": claimScript, "renew": renewScript,
		"complete": completeScript, "enqueue": enqueueScript}[name].Hash()
}

// HoldHandovers leaves hand-over records where the calls that wrote them
// put them, for an explicit MoveHandovers, until restore is called.
func HoldHandovers() (restore func()) {
	autoMove = false
	return func() { autoMove = true }
}
