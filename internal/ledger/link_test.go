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

// TestLibraryDefinesOnceAndSetsPerCallState: a function library defines the
// shared functions and constants once at its top level; every other shared
// local (derived from KEYS and ARGV, per-call tables) is declared there and
// set at the start of each function that uses it, EPOCH_RID from the
// function's own argument; a function sets nothing it does not use.
func TestLibraryDefinesOnceAndSetsPerCallState(t *testing.T) {
	lib := `-- header
local LIMIT, NAME = 10, 'x' -- constants
local EPOCH_RID = nil
local P = ARGV[1]
local now = redis.call('TIME')[1] .. EPOCH_RID
local seen = {}
local function mark(id) seen[id] = true return P .. id end
local function unused() return LIMIT end
`
	got := library("lib1", lib, []libScript{
		{fn: "lib1_a", rid: "ARGV[5]", src: "return mark(ARGV[2]) .. now"},
		{fn: "lib1_b", rid: "nil", src: "return LIMIT"},
	})
	want := "#!lua name=lib1\n" +
		"local KEYS, ARGV -- each function's own, set at its start\n" +
		"local LIMIT, NAME = 10, 'x' -- constants\n" +
		"local EPOCH_RID\nlocal P\nlocal now\nlocal seen\n" +
		"local function mark(id) seen[id] = true return P .. id end\n" +
		"local function unused() return LIMIT end\n" +
		"redis.register_function('lib1_a', function(keys, args)\nKEYS, ARGV = keys, args\n" +
		"EPOCH_RID = ARGV[5]\nP = ARGV[1]\nnow = redis.call('TIME')[1] .. EPOCH_RID\nseen = {}\n" +
		"return mark(ARGV[2]) .. now\nend)\n" +
		"redis.register_function('lib1_b', function(keys, args)\nKEYS, ARGV = keys, args\n" +
		"return LIMIT\nend)\n"
	if got != want {
		t.Fatalf("library:\n%s\nwant:\n%s", got, want)
	}
}
