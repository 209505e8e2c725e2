package lease

import (
	"fmt"
	"strings"
	"time"

	"github.com/fencedq/fencedq/internal/luafunc"
)

// brokenScripts are deliberately wrong copies of lease scripts, so tests can
// show that their checks catch a lease that breaks fencing.
var brokenScripts = map[string]struct {
	script   **luafunc.Script
	src      string
	old, new string
}{
	// An acquisition reuses the resource's last token instead of minting a
	// higher one: two holders in turn share a token.
	"acquire-reuse-token": {&opsScript, opsSrc,
		"ok, stok = pcall(token_mint, htok, ep, now)",
		"ok, stok = true, htok or token_mint(htok, ep, now)"},
	// An acquisition ignores the live holder: two holders at once.
	"acquire-ignore-holder": {&opsScript, opsSrc,
		"if hdl and tonumber(hdl) > now then", "if false then"},
}

// UseBrokenScript swaps the named script for its broken copy until restore
// is called. Calls must not run concurrently with lease calls.
func UseBrokenScript(name string) (restore func()) {
	b, ok := brokenScripts[name]
	if !ok {
		panic(fmt.Sprintf("no broken script %q", name))
	}
	if !strings.Contains(b.src, b.old) {
		panic(fmt.Sprintf("broken script %q: the text to replace is gone from the script", name))
	}
	orig := *b.script
	*b.script = luafunc.NewPlain(strings.Replace(b.src, b.old, b.new, 1))
	return func() { *b.script = orig }
}

// Age makes l look acquired or last renewed d earlier than it was, as a
// lease held for a while before KeepAlive is.
func Age(l *Lease, d time.Duration) { l.sent = l.sent.Add(-d) }
