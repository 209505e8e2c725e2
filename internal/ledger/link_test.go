package ledger

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/epoch"
)

// TestLinkTakesWhatAScriptUses: link prepends the definitions a script
// uses, directly or through another, in their order; a name mentioned only
// in a comment or a string pulls nothing in; the header comment is dropped.
func TestLinkTakesWhatAScriptUses(t *testing.T) {
	lib := `-- header: uses_c is documented here
local a = 1
local function b() return a end
-- c's comment names d, which c does not use
local c, c2 = 3, 'd'
local function d() return b() + 1 end
local function e(x)
  return x .. 'e'
end
`
	got := link(lib, "return d() .. 'c' -- e\n")
	want := "local a = 1\nlocal function b() return a end\n-- c's comment names d, which c does not use\n" +
		"local function d() return b() + 1 end\nreturn d() .. 'c' -- e\n"
	if got != want {
		t.Fatalf("linked:\n%s\nwant:\n%s", got, want)
	}
	if got := link(lib, "return c2"); !strings.HasPrefix(got, "local c, c2 = 3, 'd'\n") {
		t.Fatalf("a second name of a multi-name local: %q", got)
	}
}

// TestLinkedScriptsAreShorter: each ledger script carries less than the
// whole shared Lua; the renewal (with the claim and the completion the most
// frequent call) carries neither the minting nor the history helpers.
func TestLinkedScriptsAreShorter(t *testing.T) {
	lib := epoch.Lua + prelude
	for name, src := range map[string]string{"claim": claimSrc, "complete": completeSrc, "enqueue": enqueueSrc, "renew": renewSrc} {
		if out := link(lib, src); len(out) >= len(lib+src) {
			t.Errorf("%s: linked %d bytes of %d", name, len(out), len(lib+src))
		}
	}
	renew := link(lib, renewSrc)
	if strings.Contains(renew, "local function token_mint") || strings.Contains(renew, "local function record(") {
		t.Errorf("the renewal carries the minting or history helpers:\n%s", renew)
	}
}
